"""Session-wide test settings: one Inductor cache directory for the whole run, and the
fixtures more than one test folder uses.

Inductor compiles C++ with g++; sharing one cache across every test (and the
subprocesses they start, which inherit the environment) keeps compiles few. Under
pytest-xdist every worker process imports this file: the workers of one run share one
directory, named by the run's id, so a kernel one worker compiled serves the others.
"""
import os
import sys
import tempfile

import pytest

if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if _run_id:
        _cache_dir = os.path.join(tempfile.gettempdir(), f"torch_npu_inductor_cache_{_run_id}")
        os.makedirs(_cache_dir, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache_dir
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torch_npu_inductor_cache_")


@pytest.fixture
def two_devices():
    """npu devices 0 and 1; skips the test when fewer than two npu devices exist."""
    # torch is imported here, not at module level, so that collecting tests which never
    # use this fixture does not load torch_npu.
    import torch
    import torch_npu  # noqa: F401  (registers the npu device)

    if torch.npu.device_count() < 2:
        pytest.skip("needs TORCH_NPU_DEVICE_COUNT >= 2")
    return torch.device("npu", 0), torch.device("npu", 1)


@pytest.fixture
def fresh_compiled_state():
    """Drops compiled code and recorded NPU graphs after the test, so that what one test
    compiled or recorded never serves the next one."""
    yield
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    trees = sys.modules.get("torch_npu.compiler.graph_trees")
    if trees is not None:
        trees.reset()
