"""A CANN toolkit home for the simulated device, and the environment that points at it.

On an Ascend machine CANN is installed under ``.../Ascend/ascend-toolkit/<version>`` with a
``latest`` link, and ``set_env.sh`` exports ``ASCEND_HOME_PATH`` and friends. Clients read
that layout: DeepSpeed's op builder requires ``ASCEND_HOME_PATH`` and, like ``ds_report``,
takes the CANN version from the first ``version`` line of an ``ascend_*_install.info`` file
under it; build scripts add ``include`` and ``lib64``. This module writes the same layout
(on demand, never at import) naming the version ``torch_npu.npu.cann_version`` reports, and
renders the ``export`` lines ``set_env.sh`` would run.
"""
from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

from torch_npu.npu.cann_version import get_cann_version

__all__ = ["default_base", "ensure_home", "environment", "export_lines"]

# Component directories with a version.info, as CANN lays them out.
_COMPONENTS = ("runtime", "compiler", "opp", "hccl", "toolkit")
# Directories clients add to include and library paths, or to PATH.
_DIRECTORIES = ("include", "lib64", "bin", "opp/built-in", "toolkit/tools")


def default_base() -> Path:
    """Where the simulated ``Ascend`` tree goes unless the user names one: the user cache
    directory (``$XDG_CACHE_HOME`` or ``~/.cache``), ``torch_npu/Ascend``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_npu" / "Ascend"


def _arch() -> str:
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine() or "x86_64")


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def ensure_home(base: str | os.PathLike | None = None) -> Path:
    """Create (or refresh) ``<base>/ascend-toolkit/<version>`` and its ``latest`` link; returns
    the toolkit home, the ``latest`` path that ``ASCEND_HOME_PATH`` names."""
    root = (Path(base) if base is not None else default_base()).expanduser().absolute() / "ascend-toolkit"
    version = get_cann_version()
    versioned = root / version
    arch = _arch()
    try:
        for name in _DIRECTORIES:
            (versioned / name).mkdir(parents=True, exist_ok=True)
        # The first line naming "version" is the one DeepSpeed and ds_report read.
        _write_if_changed(versioned / "ascend_toolkit_install.info", (
            "package_name=Ascend-cann-toolkit\n"
            f"version={version}\n"
            f"innerversion={version}\n"
            f"arch={arch}\n"
            "os=linux\n"
            f"path={versioned}\n"
        ))
        for component in _COMPONENTS:
            (versioned / component).mkdir(parents=True, exist_ok=True)
            _write_if_changed(versioned / component / "version.info", (
                f"Version={get_cann_version(component.upper()) or version}\n"
                f"version_dir={version}\n"
            ))
        latest = root / "latest"
        if latest.is_symlink() or latest.exists():
            if not latest.is_symlink():
                raise FileExistsError(f"{latest} exists and is not the link to a toolkit version")
            if os.readlink(latest) != version:
                latest.unlink()
        if not latest.is_symlink():
            latest.symlink_to(version, target_is_directory=True)
        _write_if_changed(root / "set_env.sh", "".join(f"{line}\n" for line in export_lines(latest)))
    except OSError as error:
        raise OSError(
            f"cannot create the simulated CANN toolkit home under {root}: {error}. "
            "Name a writable directory: python -m torch_npu.toolkit home DIR"
        ) from error
    return latest


def environment(home: str | os.PathLike) -> dict[str, str]:
    """The variables ``set_env.sh`` sets for the toolkit at ``home`` (paths prepended to
    ``PATH``/``LD_LIBRARY_PATH`` are given alone; :func:`export_lines` keeps the old value)."""
    home = str(home)
    return {
        "ASCEND_HOME_PATH": home,
        "ASCEND_TOOLKIT_HOME": home,
        "ASCEND_OPP_PATH": os.path.join(home, "opp"),
        "ASCEND_AICPU_PATH": home,
        "TOOLCHAIN_HOME": os.path.join(home, "toolkit"),
        "LD_LIBRARY_PATH": os.path.join(home, "lib64"),
        "PATH": os.path.join(home, "bin"),
    }


_PREPENDED = ("LD_LIBRARY_PATH", "PATH")


def export_lines(home: str | os.PathLike) -> list[str]:
    """Shell ``export`` lines, safe to ``eval`` whatever the path contains."""
    lines = []
    for name, value in environment(home).items():
        if name in _PREPENDED:
            lines.append(f'export {name}={shlex.quote(value)}"${{{name}:+:${{{name}}}}}"')
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return lines
