"""The set-up of the program-scheduling study on vLLM (bench/studies/programs/programs_vllm.py; the heavy
study shares its engine): the policies compared, the engine, the workloads' shapes shrunk for 2 cores,
the locality threshold and the run sizes."""

from __future__ import annotations

POLICIES = (
    "fifo",
    "mlfq",
    "plas",
    "atlas",
)  # under QUEUES (teola.sim.program_runs: service in decoded tokens)
ENGINE = {"model": "smollm2-135m-instruct", "max_model_len": 2048, "max_num_seqs": 8}
SHAPES = {
    "chat": {"max_calls": 4, "out_mean": 14, "out_max": 24},
    "tree": {"steps": (2, 3), "width": (2, 4), "out_mean": 10, "out_max": 20},
}
THRESHOLD = 256  # locality threshold in prompt tokens (Autellix uses 2,048 with far longer contexts)
SIZES = {
    "full": {
        "kinds": ("chat", "tree"),
        "programs": {"chat": 20, "tree": 18},
        "loads": {"chat": [0.6, 1.2], "tree": [0.5, 1.0, 1.5]},
        "repeat_fifo": True,
        "balancer_programs": 14,
        "balancer_rates": [0.8, 1.6],
    },
    "quick": {
        "kinds": ("tree",),
        "programs": {"tree": 6},
        "loads": {"tree": [0.8]},
        "balancer_programs": 6,
        "balancer_rates": [0.8],
    },
}
