"""The Ascend package's public environment variables, each in a fresh process: good values
accepted with their effect here, bad values refused naming the variable (docs/runtime.md)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = str(pathlib.Path(__file__).resolve().parents[2])
PUBLIC_VARIABLES = [
    "ASCEND_LAUNCH_BLOCKING", "TASK_QUEUE_ENABLE", "INF_NAN_MODE_ENABLE", "INF_NAN_MODE_FORCE_DISABLE",
    "COMBINED_ENABLE", "ASCEND_GLOBAL_LOG_LEVEL", "TORCH_HCCL_ASYNC_ERROR_HANDLING", "TORCH_HCCL_DESYNC_DEBUG",
    "TORCH_HCCL_ZERO_COPY",
]


def _run(code: str, **variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in PUBLIC_VARIABLES + ["PYTORCH_NO_NPU_MEMORY_CACHING"]}
    env.update(PYTHONPATH=REPO, TORCH_NPU_MEMORY_CAPACITY_MB="1024", **variables)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180)


def _answer(code: str, **variables: str):
    out = _run(code, **variables)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


BAD_VALUES = [(name, "7") for name in PUBLIC_VARIABLES] + [
    ("TASK_QUEUE_ENABLE", "1.0"), ("TASK_QUEUE_ENABLE", "-1"), ("ASCEND_LAUNCH_BLOCKING", "on"),
    ("ASCEND_GLOBAL_LOG_LEVEL", "debug"),
]


@pytest.mark.parametrize("name, bad", BAD_VALUES)
def test_bad_value_stops_import_naming_the_variable(name, bad):
    out = _run("import torch_npu", **{name: bad})
    assert out.returncode != 0
    assert f"ValueError: {name}='{bad}' is not valid: {name} must be " in out.stderr, out.stderr[-2000:]
    assert "Traceback" in out.stderr and "Segmentation" not in out.stderr


TASK_QUEUE = """
import json, torch, torch_npu
before = torch.npu.get_task_queue_enable()
torch.npu.set_task_queue_enable(False)
off = torch.npu.get_task_queue_enable()
torch.npu.set_task_queue_enable(True)
print(json.dumps([before, off, torch.npu.get_task_queue_enable()]))
"""


@pytest.mark.parametrize("variables, expected", [
    ({}, [1, 0, 1]),
    ({"TASK_QUEUE_ENABLE": "0"}, [0, 0, 1]),
    ({"TASK_QUEUE_ENABLE": "2"}, [2, 0, 2]),
    ({"TASK_QUEUE_ENABLE": "2", "ASCEND_LAUNCH_BLOCKING": "1"}, [0, 0, 0]),
    ({"ASCEND_LAUNCH_BLOCKING": "0", "TASK_QUEUE_ENABLE": ""}, [1, 0, 1]),
])
def test_task_queue_level_and_launch_blocking(variables, expected):
    assert _answer(TASK_QUEUE, **variables) == expected


LAUNCH = """
import json, torch, torch_npu
x = torch.arange(6., device="npu")
try:
    torch.empty(2, device="npu").index_select(0, torch.tensor([5], device="npu"))
    raised = None
except (IndexError, RuntimeError) as e:
    raised = type(e).__name__
print(json.dumps([(x * 2).cpu().tolist(), raised]))
"""


def test_launch_blocking_errors_raise_at_the_launching_call():
    # Synchronous launches: the bad kernel's error comes from the call that launched it.
    blocking = _answer(LAUNCH, ASCEND_LAUNCH_BLOCKING="1")
    assert blocking == _answer(LAUNCH, ASCEND_LAUNCH_BLOCKING="0")
    assert blocking[0] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] and blocking[1] is not None


INF_NAN = """
import json, torch, torch_npu
from torch_npu.npu.utils import is_support_inf_nan, npu_check_overflow
x = torch.tensor([12.0], dtype=torch.float16)
npu = torch.exp(x.npu()).cpu()
print(json.dumps([is_support_inf_nan(), bool(torch.equal(npu, torch.exp(x))), npu_check_overflow(torch.exp(x.npu()))]))
"""


@pytest.mark.parametrize("variables, inf_nan", [
    ({}, True),
    ({"INF_NAN_MODE_ENABLE": "1"}, True),
    ({"INF_NAN_MODE_ENABLE": "0"}, True),  # an A2/A3 card refuses saturation unless forced
    ({"INF_NAN_MODE_FORCE_DISABLE": "0"}, True),
    ({"INF_NAN_MODE_FORCE_DISABLE": "1"}, False),
    ({"INF_NAN_MODE_ENABLE": "0", "INF_NAN_MODE_FORCE_DISABLE": "1"}, False),
])
def test_inf_nan_mode(variables, inf_nan):
    # The values stay cpu's in either mode; the overflow is reported either way.
    assert _answer(INF_NAN, **variables) == [inf_nan, True, True]


LOG_LEVEL = """
import json, logging, torch, torch_npu
print(json.dumps([logging.getLogger("torch_npu.compiler.inductor.registration").getEffectiveLevel(),
                  logging.getLogger("torch_npu.npu.anything").getEffectiveLevel()]))
"""


@pytest.mark.parametrize("value, level", [
    ("0", "DEBUG"), ("1", "INFO"), ("2", "WARNING"), ("3", "ERROR"), ("4", None),
])
def test_global_log_level_sets_torch_npu_loggers(value, level):
    import logging

    expected = logging.CRITICAL + 1 if level is None else getattr(logging, level)
    assert _answer(LOG_LEVEL, ASCEND_GLOBAL_LOG_LEVEL=value) == [expected, expected]


def test_global_log_level_4_silences_and_unset_leaves_logging_alone():
    code = ("import logging, torch, torch_npu; logging.basicConfig(level=logging.DEBUG);"
            "logging.getLogger('torch_npu.npu.x').error('visible-error'); print('[0]')")
    assert "visible-error" not in _run(code, ASCEND_GLOBAL_LOG_LEVEL="4").stderr
    assert "visible-error" in _run(code, ASCEND_GLOBAL_LOG_LEVEL="3").stderr
    root = _answer("import json, logging; print(json.dumps(logging.getLogger().level))")
    assert _answer(LOG_LEVEL) == [root, root]


MEMORY = """
import json, torch, torch_npu
seen = []
a = torch.empty(1 << 20, device="npu")          # 4 MiB: the large pool
b = torch.empty(100, device="npu")              # small pool
seen.append([torch.npu.memory_allocated(), torch.npu.memory_reserved()])
del a
seen.append([torch.npu.memory_allocated(), torch.npu.memory_reserved()])
del b
seen.append([torch.npu.memory_allocated(), torch.npu.memory_reserved()])
c = torch.ones(3 << 20, device="npu") * 2
seen.append(float(c.sum()))
print(json.dumps(seen))
"""


@pytest.mark.parametrize("conf", ["", "expandable_segments:True"])
def test_no_memory_caching_returns_freed_memory(conf):
    cached = _answer(MEMORY, PYTORCH_NPU_ALLOC_CONF=conf)
    uncached = _answer(MEMORY, PYTORCH_NPU_ALLOC_CONF=conf, PYTORCH_NO_NPU_MEMORY_CACHING="1")
    assert _answer(MEMORY, PYTORCH_NPU_ALLOC_CONF=conf, PYTORCH_NO_NPU_MEMORY_CACHING="0") == cached
    assert cached[2] == [0, cached[0][1]]          # the caching allocator keeps everything
    assert uncached[0] == cached[0]
    small_segment = 2 << 20
    assert uncached[1][0] == cached[1][0] and uncached[1][1] < cached[1][1]
    assert uncached[1][1] <= uncached[1][0] + small_segment   # reserved follows allocated
    assert uncached[2] == [0, 0]
    assert uncached[3] == cached[3] == float(3 << 21)


def test_no_memory_caching_bad_value_is_refused_at_first_allocation():
    code = "import torch, torch_npu\ntry:\n    torch.empty(4, device='npu')\nexcept RuntimeError as e:\n    print(e)"
    out = _run(code, PYTORCH_NO_NPU_MEMORY_CACHING="yes")
    assert out.returncode == 0, out.stderr
    assert "PYTORCH_NO_NPU_MEMORY_CACHING='yes' is not valid: PYTORCH_NO_NPU_MEMORY_CACHING must be " in out.stdout


HCCL = """
import json, os, datetime, torch, torch_npu, torch.distributed as dist
store = dist.HashStore()
os.environ.update(json.loads(os.environ["LATER"]))
try:
    dist.init_process_group("hccl", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    t = torch.arange(4., device="npu")
    dist.all_reduce(t)
    result = t.cpu().tolist()
    dist.destroy_process_group()
except ValueError as e:
    result = str(e)
print(json.dumps(result))
"""


@pytest.mark.parametrize("name, good, bad", [
    ("TORCH_HCCL_ASYNC_ERROR_HANDLING", "3", "4"),
    ("TORCH_HCCL_DESYNC_DEBUG", "1", "2"),
    ("TORCH_HCCL_ZERO_COPY", "1", "true"),
])
def test_hccl_variables_checked_when_a_group_is_created(name, good, bad):
    assert _answer(HCCL, **{name: good}, LATER="{}") == [0.0, 1.0, 2.0, 3.0]
    refused = _answer(HCCL, LATER=json.dumps({name: bad}))  # set after import: the group checks it
    assert refused.startswith(f"{name}='{bad}' is not valid: {name} must be ")


def test_combined_enable_accepted_results_unchanged():
    code = ("import json, torch, torch_npu; x = torch.arange(24.).reshape(2, 3, 4);"
            "y = x.npu().transpose(0, 2)[1:].contiguous().cpu();"
            "print(json.dumps(torch.equal(y, x.transpose(0, 2)[1:].contiguous())))")
    assert _answer(code, COMBINED_ENABLE="1") is True and _answer(code, COMBINED_ENABLE="0") is True
