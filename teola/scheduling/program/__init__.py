"""Program-level LLM scheduling (Autellix, LAMPS), as pure logic the engine tier consults: PLAS /
ATLAS / MLFQ with their queues (`queues.py`, `policy.py`) over the process table of
`teola.scheduling.process_table`, LAMPS / SJF / FCFS ranking, pause handling (INFERCEPT's preserve /
discard / swap) and output-length prediction. The tool-call syntax is the compiler's
(`teola.compile.tool_syntax`)."""
