"""Builds torch_npu and its simulated NPU runtime.

The runtime is one shared library, ``torch_npu/lib/libtorch_npu.so``: every file of
``torch_npu/csrc`` plus the public C++ API that C++ extensions build against (headers in
``torch_npu/include``). ``torch_npu._C`` is a stub module linked to that library (rpath
``$ORIGIN/lib``); Python finds its ``PyInit__C`` in the library, the stub's only
dependency. So the Python module and every extension that links ``-ltorch_npu`` share one
loaded runtime: one allocator, one set of streams, one registration with the dispatcher
(see docs/cpp_extensions.md).

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

    def get_ext_fullpath(self, ext_name):
        # The runtime library is a plain shared library (no Python ABI suffix) that
        # extensions link by name: -ltorch_npu.
        if ext_name == RUNTIME_LIBRARY:
            python_module = super().get_ext_fullpath(PYTHON_MODULE)
            return os.path.join(os.path.dirname(python_module), "lib", RUNTIME_LIBRARY_FILE)
        return super().get_ext_fullpath(ext_name)

    def get_ext_filename(self, fullname):
        if fullname == RUNTIME_LIBRARY:
            return os.path.join("torch_npu", "lib", RUNTIME_LIBRARY_FILE)
        return super().get_ext_filename(fullname)

    def copy_extensions_to_source(self):
        # lib/ holds only build outputs, so a fresh checkout has no such directory yet.
        build_py = self.get_finalized_command("build_py")
        os.makedirs(build_py.get_package_dir("torch_npu.lib"), exist_ok=True)
        super().copy_extensions_to_source()

    def build_extension(self, ext):
        if ext.name == PYTHON_MODULE:
            # Linked against the library just built, wherever this build puts it; found at
            # run time next to the module, in lib/.
            library_dir = os.path.dirname(self.get_ext_fullpath(RUNTIME_LIBRARY))
            ext.extra_link_args = ext.extra_link_args + [f"-L{library_dir}"]
        super().build_extension(ext)


# The library's name ends in _C: the last part of an extension's name becomes its
# TORCH_EXTENSION_NAME, and the library defines the Python module _C.
RUNTIME_LIBRARY = "torch_npu.lib._C"
RUNTIME_LIBRARY_FILE = "libtorch_npu.so"
PYTHON_MODULE = "torch_npu._C"

# The runtime's sources, one folder per concern (runtime/, aten/, graphs/, ..., public_api/),
# less the Python module's stub, which is built on its own below.
PYTHON_MODULE_SOURCES = [os.path.join("torch_npu", "csrc", "python_module", "stub.cpp")]
runtime_sources = sorted(
    path for path in glob.glob(os.path.join("torch_npu", "csrc", "**", "*.cpp"), recursive=True)
    if os.path.dirname(path) != os.path.join("torch_npu", "csrc", "python_module")
)
include_dir = os.path.join(here, "torch_npu", "include")

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
            RUNTIME_LIBRARY,
            runtime_sources,
            # -g0 overrides the -g of Python's default flags: debug info triples the
            # compile time of each runtime file (ATen's headers) for no user benefit.
            # OpenMP for at::parallel_for in the runtime's own kernels; at run time this binds to
            # the libgomp torch already loaded, so the kernels share torch's thread team.
            # Hidden by default: only the public C++ API (TORCH_NPU_API) and PyInit__C are
            # exported.
            extra_compile_args={"cxx": ["-O2", "-g0", CXX_STANDARD, "-fvisibility=hidden", "-fopenmp"]},
            extra_link_args=["-fopenmp", f"-Wl,-soname,{RUNTIME_LIBRARY_FILE}"],
            # The npu's Kineto activity profiler (torch.profiler device rows) builds
            # against the Kineto headers that ship with torch.
            define_macros=[("USE_KINETO", None)],
            # The repository root: the runtime includes its own headers as
            # "torch_npu/csrc/<concern>/<name>.h"; torch_npu/include holds the public C++
            # API's headers, included by the same kind of path
            # ("torch_npu/csrc/core/npu/NPUStream.h") by the runtime and by extensions.
            include_dirs=[here, os.path.join(os.path.dirname(torch.__file__), "include", "kineto"), include_dir],
        ),
        CppExtension(
            PYTHON_MODULE,
            PYTHON_MODULE_SOURCES,
            extra_compile_args={"cxx": ["-O2", "-g0", CXX_STANDARD]},
            # --no-as-needed keeps the library a dependency of the stub, which references
            # nothing of it by name at link time.
            extra_link_args=["-Wl,--no-as-needed", "-ltorch_npu", "-Wl,--as-needed", "-Wl,-rpath,$ORIGIN/lib"],
        ),
    ],
    # The public C++ API's headers, for extensions built against an installed package.
    package_data={"torch_npu": ["include/**/*.h", "include/**/*.hpp"]},
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
