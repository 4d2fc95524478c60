"""The machine engines run on: its cores and accelerators, the rule of core lending between engine
processes, the knee of a latency curve. Plain facts and arithmetic, imported by adapters and tuning."""
