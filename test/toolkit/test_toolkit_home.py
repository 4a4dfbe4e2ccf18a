"""The simulated CANN home (``python -m torch_npu.toolkit home|env``): the files clients
read, the environment ``set_env.sh`` would set, and that ``import torch_npu`` touches
neither. Every case runs the command in a fresh interpreter, as a user would."""
from __future__ import annotations

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh_interpreter import REPO_ROOT, run_python  # noqa: E402


def _toolkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    child_env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TORCH_NPU_MEMORY_CAPACITY_MB": "1024", **(env or {})}
    return subprocess.run([sys.executable, "-m", "torch_npu.toolkit", *args], cwd=REPO_ROOT, env=child_env,
                          capture_output=True, text=True, timeout=300)


def _reported_cann_version(env: dict[str, str] | None = None) -> str:
    return run_python("import torch_npu; print(torch_npu.npu.utils.get_cann_version())", env=env).strip()


def _deepspeed_installed_cann_version(ascend_path: str) -> str:
    """How DeepSpeed's NPU op builder and ds_report read the CANN version: the first line
    naming ``version`` of the first ``ascend_*_install.info`` found walking the home."""
    cann_version = ""
    for dirpath, _, filenames in os.walk(os.path.realpath(ascend_path)):
        if cann_version:
            break
        install_files = [file for file in filenames if re.match(r"ascend_.*_install\.info", file)]
        if install_files:
            filepath = os.path.join(dirpath, install_files[0])
            with open(filepath, "r") as f:
                for line in f:
                    if line.find("version") != -1:
                        cann_version = line.strip().split("=")[-1]
                        break
    return cann_version


def test_home_has_the_layout_and_version_clients_read(tmp_path):
    result = _toolkit("home", str(tmp_path))
    assert result.returncode == 0, result.stderr
    home = result.stdout.strip()
    assert home == str(tmp_path / "ascend-toolkit" / "latest")
    version = _reported_cann_version()
    assert os.path.realpath(home) == str(tmp_path / "ascend-toolkit" / version)
    for directory in ("include", "lib64", "bin", "opp"):
        assert os.path.isdir(os.path.join(home, directory)), directory
    info = open(os.path.join(home, "ascend_toolkit_install.info")).read()
    assert f"version={version}\n" in info
    for component in ("runtime", "compiler", "opp", "hccl", "toolkit"):
        text = open(os.path.join(home, component, "version.info")).read()
        assert text.splitlines()[0] == f"Version={version}", (component, text)
    assert _deepspeed_installed_cann_version(home) == version
    # Running it again changes nothing and still succeeds.
    again = _toolkit("home", str(tmp_path))
    assert again.returncode == 0 and again.stdout.strip() == home


def test_home_follows_the_cann_version_override(tmp_path):
    env = {"TORCH_NPU_CANN_VERSION": "8.3.RC1"}
    result = _toolkit("home", str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr
    assert _deepspeed_installed_cann_version(result.stdout.strip()) == _reported_cann_version(env) == "8.3.RC1"


def test_env_one_liner_sets_the_set_env_variables(tmp_path):
    base = tmp_path / "with space"
    script = (
        f'export LD_LIBRARY_PATH=/opt/before; eval "$({sys.executable} -m torch_npu.toolkit env \'{base}\')" && '
        'for v in ASCEND_HOME_PATH ASCEND_TOOLKIT_HOME ASCEND_OPP_PATH ASCEND_AICPU_PATH LD_LIBRARY_PATH PATH; '
        'do echo "$v=${!v}"; done'
    )
    result = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": REPO_ROOT})
    assert result.returncode == 0, result.stderr
    values = dict(line.split("=", 1) for line in result.stdout.splitlines())
    home = str(base / "ascend-toolkit" / "latest")
    assert values["ASCEND_HOME_PATH"] == values["ASCEND_TOOLKIT_HOME"] == values["ASCEND_AICPU_PATH"] == home
    assert values["ASCEND_OPP_PATH"] == os.path.join(home, "opp")
    assert values["LD_LIBRARY_PATH"] == f"{home}/lib64:/opt/before"
    assert values["PATH"].startswith(f"{home}/bin:") and values["PATH"].endswith(os.environ["PATH"])
    assert _deepspeed_installed_cann_version(values["ASCEND_HOME_PATH"]) == _reported_cann_version()
    # The home's set_env.sh, sourced, gives the same environment.
    sourced = subprocess.run(["bash", "-c", f"source '{base}/ascend-toolkit/set_env.sh' && echo $ASCEND_HOME_PATH"],
                             capture_output=True, text=True, timeout=60)
    assert sourced.stdout.strip() == home


def test_import_sets_nothing_and_creates_no_home(tmp_path):
    out = run_python(
        "import os, torch, torch_npu\n"
        "torch.ones(2, device='npu')\n"
        "print(sorted(k for k in os.environ if k.startswith('ASCEND') or k == 'TOOLCHAIN_HOME'))\n",
        env={"XDG_CACHE_HOME": str(tmp_path), "HOME": str(tmp_path), "TORCH_NPU_MEMORY_CAPACITY_MB": "1024"},
    )
    assert out.strip() == "[]"
    assert list(tmp_path.iterdir()) == []


def test_unwritable_place_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _toolkit("home", str(blocker))
    assert result.returncode == 1
    assert "cannot create the simulated CANN toolkit home" in result.stderr
    assert "python -m torch_npu.toolkit home DIR" in result.stderr
    assert "Traceback" not in result.stderr
