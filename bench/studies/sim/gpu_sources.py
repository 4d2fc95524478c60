"""Where the published GPU figures come from (bench/studies/sim/gpu_figures.py holds the figures): each
source's citation, the per-request (prompt, output) lengths of the two vLLM runs, and the notes on how a
source's figure is read."""

from __future__ import annotations

TRTLLM = (
    "TensorRT-LLM's docs/source/performance.md ('This data has been updated for v0.6.1'; GPT-J, Llama2-7b "
    "and Llama2-70b engines, its Methodology section), https://github.com/NVIDIA/TensorRT-LLM/blob/"
    "138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md"
)
TRTLLM_PEAK = f"{TRTLLM}, 'Peak Throughput: A100 GPUs (FP16)' table (gptSessionBenchmark, static batch)"
TRTLLM_LATENCY = f"{TRTLLM}, 'Low Latency: A100 GPUs (FP16)' table (v0.5 data, batch 1, 1st token latency)"
NEMO = (
    "NVIDIA NeMo Framework user guide, Performance > Llama-2 Results > Inference Performance, "
    "Configuration 1 'Chatbot Conversation' table (TensorRT-LLM export; precision not stated), "
    "https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html"
)


LAMBDA_RUN = (
    "Lambda's vLLM benchmark (LambdaLabsML/vllm-benchmark) at commit "
    "a9b42a5f83bc39976bcb6bd44a96b2b15d820e10, "
    "results/prompt_{n}/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2000.json: backend vllm, {n} "
    "ShareGPT prompts sent at once (request rate inf), {what}, each request's input_lens and output_lens "
    "listed"
)
LAMBDA = LAMBDA_RUN.format(n=10, what="output_throughput 227.04 tok/s over 8.567 s, mean_ttft_ms 139.23")
LAMBDA_80 = LAMBDA_RUN.format(n=80, what="output_throughput 1197.26 tok/s over 11.859 s")
LAMBDA_LENGTHS = tuple(
    zip((13, 25, 27, 10, 329, 29, 399, 328, 4, 205), (120, 507, 233, 194, 101, 741, 9, 3, 6, 31))
)
LAMBDA_80_LENGTHS = tuple(
    zip(
        (
            13,
            25,
            27,
            10,
            329,
            29,
            399,
            328,
            4,
            205,
            16,
            372,
            403,
            9,
            12,
            770,
            227,
            8,
            14,
            390,
            659,
            59,
            76,
            744,
            619,
            279,
            344,
            9,
            10,
            45,
            11,
            4,
            80,
            768,
            317,
            40,
            619,
            8,
            298,
            16,
            17,
            696,
            575,
            11,
            7,
            281,
            12,
            147,
            481,
            770,
            336,
            6,
            331,
            9,
            45,
            222,
            802,
            481,
            93,
            641,
            22,
            15,
            16,
            77,
            32,
            689,
            178,
            9,
            628,
            480,
            42,
            336,
            24,
            515,
            761,
            112,
            113,
            348,
            82,
            467,
        ),
        (
            120,
            495,
            233,
            194,
            101,
            741,
            9,
            3,
            6,
            31,
            392,
            84,
            396,
            45,
            291,
            9,
            173,
            277,
            334,
            37,
            587,
            361,
            36,
            135,
            26,
            45,
            450,
            118,
            226,
            4,
            5,
            146,
            59,
            11,
            567,
            192,
            478,
            130,
            13,
            223,
            188,
            16,
            35,
            276,
            202,
            492,
            239,
            129,
            26,
            79,
            17,
            204,
            11,
            207,
            78,
            340,
            17,
            9,
            123,
            6,
            559,
            5,
            316,
            26,
            417,
            206,
            151,
            42,
            25,
            18,
            159,
            0,
            25,
            267,
            19,
            12,
            768,
            67,
            628,
            11,
        ),
    )
)
LAMBDA_NOTE = (
    "the vLLM version is not in the result file (the repository's scripts default to v0.5.4, the run "
    "is dated 2024-09-07); its tokens arrive about 10 at a time (its itls: about 114 ms each), as "
    "multi-step scheduling streams them, i.e. about 11.4 ms per decode iteration; the measured "
    "time includes the HTTP server and streaming; with 80 prompts (19,504 tokens) vLLM without chunked "
    "prefill prefills them in several iterations of at most 8,192 tokens before any decodes, the "
    "simulator in one (the same linear-layer and attention work, two CPU steps fewer), so only the "
    "80-prompt run's throughput is compared, not its first tokens"
)
PER_GPU = (
    "the A100 table's header says 'out tok/s'; the Llama-2-70B rows are read per GPU (simulated total / "
    "4) because the same page's H100 table states per GPU and a total of 670 tok/s at batch 1,280 would "
    "make one decode iteration 1.9 s, five times the page's own 377 ms first-token latency of a "
    "2,048-token prompt at TP4"
)
