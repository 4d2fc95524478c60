"""The tool engine: registered Python callables and HTTP tools, and the built-in tools."""
