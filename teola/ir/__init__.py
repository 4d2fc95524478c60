"""The graph IR: primitives, their ops and op families, object-store refs, the template `Node` with `>>`,
engine specs, and LLM generation defaults."""
