"""The simulator: teola's unchanged runtime on a virtual clock with engines as calibrated cost models.

- `teola.sim.virtual_loop`: `VirtualEventLoop` / `run_virtual` (time jumps to the next timer);
- `teola.sim.run`: `simulate(app, profile, rate, queries, instances)` -> `SimReport`;
- engines/sim/llm.py, engines/sim/sim_engine.py, engines/sim/profile.py: the simulated engines and the
  profiles they are built from (`Engine(..., simulate="<profile>")` selects one per engine).
"""
