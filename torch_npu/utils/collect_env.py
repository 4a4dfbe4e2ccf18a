"""An environment report for bug reports on torch_npu (``python -m torch_npu.utils.collect_env``).

The shape of Ascend's report: torch and torch_npu versions, compilers, OS, Python, the
packages that matter, the ``PYTORCH_NPU_ALLOC_CONF`` allocator settings, the CPU and the
CANN version (the simulated one here). The probing of compilers, OS and packages reuses
``torch.utils.collect_env``'s helpers.
"""
from __future__ import annotations

import os
import stat
from collections import namedtuple

__all__ = [
    "SystemEnv", "check_directory_path_readable", "check_path_owner_consistent", "get_cann_version", "get_env_info",
    "get_pretty_env_info", "get_torch_npu_install_path", "get_torch_npu_version", "main", "pretty_str",
]

SystemEnv = namedtuple("SystemEnv", [
    "torch_version", "torch_npu_version", "is_debug_build", "gcc_version", "clang_version", "cmake_version", "os",
    "libc_version", "python_version", "python_platform", "pip_version", "pip_packages", "conda_packages",
    "caching_allocator_config", "is_xnnpack_available", "cpu_info", "cann_version",
])

PACKAGE_PATTERNS = ["torch", "numpy", "mypy", "flake8", "onnx", "optree", "triton", "mlir", "transformers",
                    "accelerate", "deepspeed", "diffusers"]


def check_path_owner_consistent(path: str):
    """Raises when ``path`` exists and is owned by another user than the caller (root may read anything)."""
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")
    if os.geteuid() != 0 and os.stat(path).st_uid != os.geteuid():
        raise RuntimeError(f"The path {path} is owned by uid {os.stat(path).st_uid}, not by the current user "
                           f"(uid {os.geteuid()}); change its owner or run as that user")


def check_directory_path_readable(path):
    """Raises when ``path`` is not an existing, readable directory (or regular file) of the caller's."""
    check_path_owner_consistent(path)
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path {path}: it is a soft link")
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"The path {path} is not readable by the current user")


def get_torch_npu_version():
    import torch_npu

    return torch_npu.__version__


def get_torch_npu_install_path():
    import torch_npu

    return os.path.dirname(os.path.abspath(torch_npu.__file__))


def get_cann_version():
    """The CANN version of this environment (the simulated card's)."""
    from torch_npu.npu.cann_version import get_cann_version as component_version

    return component_version("CANN")


def _allocator_config():
    return {k: os.environ[k] for k in ("PYTORCH_NPU_ALLOC_CONF", "PYTORCH_ALLOC_CONF") if os.environ.get(k)}


def get_env_info():
    """A ``SystemEnv`` of this machine (runs a few commands: compilers, pip, conda)."""
    import sys

    import torch
    from torch.utils import collect_env as tce

    run = tce.run
    pip_version, pip_packages = tce.get_pip_packages(run, PACKAGE_PATTERNS)
    return SystemEnv(
        torch_version=torch.__version__,
        torch_npu_version=get_torch_npu_version(),
        is_debug_build=str(torch.version.debug),
        gcc_version=tce.get_gcc_version(run),
        clang_version=tce.get_clang_version(run),
        cmake_version=tce.get_cmake_version(run),
        os=tce.get_os(run),
        libc_version=tce.get_libc_version(),
        python_version="{} ({}-bit runtime)".format(
            " ".join(line.strip() for line in sys.version.splitlines()), sys.maxsize.bit_length() + 1),
        python_platform=tce.get_python_platform(),
        pip_version=pip_version,
        pip_packages=pip_packages,
        conda_packages=tce.get_conda_packages(run, PACKAGE_PATTERNS),
        caching_allocator_config=_allocator_config(),
        is_xnnpack_available=tce.is_xnnpack_available(),
        cpu_info=tce.get_cpu_info(run),
        cann_version=get_cann_version(),
    )


_TEMPLATE = """\
PyTorch version: {torch_version}
Torch-npu version: {torch_npu_version}
Is debug build: {is_debug_build}

OS: {os}
GCC version: {gcc_version}
Clang version: {clang_version}
CMake version: {cmake_version}
Libc version: {libc_version}

Python version: {python_version}
Python platform: {python_platform}

CANN:
{cann_version}

NPU allocator config: {caching_allocator_config}
Is XNNPACK available: {is_xnnpack_available}

CPU:
{cpu_info}

Versions of relevant libraries:
{pip_packages}
{conda_packages}
"""


def pretty_str(envinfo):
    """The report text of a ``SystemEnv``."""
    fields = envinfo._asdict()
    for key, value in list(fields.items()):
        if value is None or value == "":
            fields[key] = "Could not collect"
    if fields["pip_packages"] != "Could not collect":
        fields["pip_packages"] = "\n".join(f"[{envinfo.pip_version}] {line}"
                                           for line in str(envinfo.pip_packages).splitlines())
    if fields["conda_packages"] != "Could not collect":
        fields["conda_packages"] = "\n".join(f"[conda] {line}" for line in str(envinfo.conda_packages).splitlines())
    else:
        fields["conda_packages"] = ""
    fields["caching_allocator_config"] = fields["caching_allocator_config"] or "Not set"
    return _TEMPLATE.format(**fields).rstrip() + "\n"


def get_pretty_env_info():
    return pretty_str(get_env_info())


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
