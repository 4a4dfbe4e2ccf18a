"""Builds torch_npu and its simulated NPU runtime extension ``torch_npu._C``.

Install without build isolation so the extension compiles against the torch that is
already installed (``pip install --no-build-isolation -e .``); an isolated build would
let pip resolve its own torch.
"""
import glob
import os

from setuptools import find_packages, setup

try:
    import torch  # noqa: F401
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError as exc:  # pragma: no cover - only hit on a misconfigured install
    raise SystemExit(
        "torch_npu must be built against an installed torch==2.13.0: run "
        "`pip install torch==2.13.0` first, then "
        "`pip install --no-build-isolation -e .`"
    ) from exc

# Both cores: ninja honours MAX_JOBS.
os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 2))

here = os.path.dirname(os.path.abspath(__file__))
# Object files live here between builds. pip's editable install hands build_ext a fresh
# temporary build directory each time (setup.cfg's build_temp is not consulted then), which
# would recompile the whole runtime on every `pip install -e .`; ninja rebuilds only what
# changed when the objects stay in one place.
OBJECT_DIR = os.path.join(here, "build", "extension_objects")


class BuildExtensionKeepingObjects(BuildExtension.with_options(use_ninja=True)):
    def finalize_options(self):
        super().finalize_options()
        self.build_temp = OBJECT_DIR

# The runtime's sources, one folder per concern (runtime/, aten/, graphs/, ...).
sources = sorted(glob.glob(os.path.join("torch_npu", "csrc", "**", "*.cpp"), recursive=True))

# The C++ standard torch's own headers need: torch 2.14's headers use C++20 and fail to
# compile as C++17; 2.13's build as C++17.
_torch_release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
CXX_STANDARD = "-std=c++20" if _torch_release >= (2, 14) else "-std=c++17"

setup(
    name="torch_npu",
    version="2.13.0",
    description="NPU device integration for PyTorch with a built-in simulated NPU runtime",
    packages=find_packages(include=["torch_npu", "torch_npu.*"]),
    python_requires=">=3.10",
    install_requires=["torch==2.13.0"],
    extras_require={
        "mlir": ["torch-mlir==20261001"],
        "test": [
            "pytest",
            # The suite runs on two worker processes (README's test command): most of its
            # time is fresh interpreters importing torch, one core each.
            "pytest-xdist",
            "parameterized",
            "onnx",
            "onnxscript",
            # torch.testing._internal (PyTorch's OpInfo database, swept on npu) imports it.
            "expecttest",
            # Real client code the tests run on npu. torchvision 0.28.0 on the index is a
            # CUDA build whose C++ ops do not load against the CPU torch; the tests define
            # its two op schemas before importing its pure-Python model code.
            "torchvision==0.28.0",
            "transformers==5.23.0",
            "accelerate==1.15.0",
        ],
    },
    ext_modules=[
        CppExtension(
            "torch_npu._C",
            sources,
            # -g0 overrides the -g of Python's default flags: debug info triples the
            # compile time of each runtime file (ATen's headers) for no user benefit.
            # OpenMP for at::parallel_for in the runtime's own kernels; at run time this binds to
            # the libgomp torch already loaded, so the kernels share torch's thread team.
            extra_compile_args={"cxx": ["-O2", "-g0", CXX_STANDARD, "-fvisibility=hidden", "-fopenmp"]},
            extra_link_args=["-fopenmp"],
            # The npu's Kineto activity profiler (torch.profiler device rows) builds
            # against the Kineto headers that ship with torch.
            define_macros=[("USE_KINETO", None)],
            # The repository root: the runtime includes its own headers as
            # "torch_npu/csrc/<concern>/<name>.h", the path C++ extensions built against
            # torch_npu use too (torch_npu.utils.cpp_extension).
            include_dirs=[here, os.path.join(os.path.dirname(torch.__file__), "include", "kineto")],
        )
    ],
    cmdclass={"build_ext": BuildExtensionKeepingObjects},
    entry_points={
        "console_scripts": ["npu-smi = torch_npu.toolkit.npu_smi:main"],
        "torch.backends": ["torch_npu = torch_npu:_autoload"],
        "torch_dynamo_backends": [
            "npu = torch_npu.compiler.backends.registry:npu_backend_entry",
            "npugraph_ex = torch_npu.compiler.backends.registry:npugraph_ex_backend_entry",
            "npugraphs = torch_npu.compiler.backends.registry:npugraphs_backend_entry",
        ],
    },
    zip_safe=False,
)
