"""An emulated GPU vLLM server (`teola emulate`): vLLM's OpenAI-compatible API timed by simulated
engines (engines/sim/llm.py) with a profile's GPU costs, on the wall clock. The app:
`teola.emulate.server.create_emulator(EmulatorSettings(...))` (teola.emulate.settings). See
docs/emulator.md."""
