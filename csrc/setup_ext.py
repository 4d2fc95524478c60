"""Build the `teola_kvswap` extension in place (run by csrc/build.sh; not a package of its own).

CPU sources always; the CUDA sources too when torch was built with CUDA and a CUDA toolkit is found
(TEOLA_KVSWAP_CUDA=0 turns that off). The module lands in engines/kvswap/_native/.
"""

import os
import sys
from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def with_cuda() -> bool:
    """Whether to compile the CUDA path: CUDA torch + a toolkit, unless TEOLA_KVSWAP_CUDA=0."""
    flag = os.environ.get("TEOLA_KVSWAP_CUDA", "auto")
    return flag != "0" and torch.version.cuda is not None and CUDA_HOME is not None


def main() -> None:
    cuda = with_cuda()
    sources = ["kvswap_plan.cpp", "kvswap_cpu.cpp"]
    cxx = ["-O3", "-std=c++20", "-fopenmp", f"-DTEOLA_WITH_CUDA={int(cuda)}"]
    kwargs = dict(extra_link_args=["-fopenmp"])
    if cuda:
        sources += ["kvswap_cuda.cu", "kvswap_cuda_ops.cu"]
        nvcc = ["-O3", "-std=c++20", "-DTEOLA_WITH_CUDA=1"]
        ext = CUDAExtension(
            "teola_kvswap",
            [str(HERE / s) for s in sources],
            extra_compile_args={"cxx": cxx, "nvcc": nvcc},
            **kwargs,
        )
    else:
        ext = CppExtension(
            "teola_kvswap", [str(HERE / s) for s in sources], extra_compile_args={"cxx": cxx}, **kwargs
        )
    print(f"[kvswap] building teola_kvswap (cuda={cuda}) with torch {torch.__version__}", flush=True)
    setup(
        name="teola_kvswap",
        ext_modules=[ext],
        cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
        script_args=[
            "-q",
            "build_ext",
            "--build-lib",
            str(ROOT / "engines" / "kvswap" / "_native"),
            "--build-temp",
            str(HERE / "build" / "tmp"),
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
