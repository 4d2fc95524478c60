"""The public API: `App` (template, compile, run), `Program` (client sessions whose LLM calls the runtime
schedules as one program; calls that pause for tools) and engines shared by apps."""
