"""torch_npu.utils: tensor combination, the CANN version, save_async/load, thread affinity,
FlopsCounter (against torch's FlopCounterMode), collect_env, NpuExtension, SyncBatchNorm
(against F.batch_norm on cpu) and the step profiler."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F
from parameterized import parameterized

import torch_npu
from torch_npu.utils import (FlopsCounter, get_cann_version, get_part_combined_tensor, is_combined_tensor_valid,
                             npu_combine_tensors, reset_thread_affinity, save_async, set_thread_affinity)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- combine_tensors (written the way Ascend's test_combine_tensors is) ----------------

@parameterized.expand([("half", torch.half), ("float", torch.float), ("bfloat16", torch.bfloat16)])
def test_combine_tensors_re_homes_each_tensor(_name, dtype):
    x = torch.randn((2, 2, 2, 2), device="npu", dtype=dtype)
    y = torch.randn((4, 4), device="npu", dtype=dtype)
    z = torch.randn((3, 3, 3), device="npu", dtype=dtype)
    before = [t.cpu() for t in (x, y, z)]
    combined = npu_combine_tensors([x, y, z])
    assert combined.numel() == 16 + 16 + 27 and combined.dtype == dtype and combined.is_contiguous()
    assert torch.equal(combined.cpu(), torch.cat([t.reshape(-1) for t in before]))
    for t, b in zip((x, y, z), before):
        assert torch.equal(t.cpu(), b)
    assert is_combined_tensor_valid(combined, [x, y, z])
    assert not is_combined_tensor_valid(combined, [x, y, torch.randn(3, device="npu", dtype=dtype)])
    # Writes go both ways: through a part of the combined tensor, and through the tensor.
    part = get_part_combined_tensor(combined, 16, 16)
    part.fill_(3)
    assert bool((y == 3).all())
    z.mul_(0)
    assert not combined[32:].any()


def test_combine_without_copying_values_and_empty_list():
    x = torch.ones(5, device="npu")
    combined = npu_combine_tensors([x], require_copy_value=False)
    assert not combined.any() and not x.any()
    assert npu_combine_tensors([]) is None


@pytest.mark.parametrize("tensors, error", [
    (lambda: [torch.ones(2, device="npu"), torch.ones(2, device="npu", dtype=torch.half)], TypeError),
    (lambda: [torch.ones(2, 3, device="npu").t()], ValueError),
    (lambda: [torch.ones(2, device="npu"), "x"], TypeError),
])
def test_combine_rejects_bad_input_with_a_clear_error(tensors, error):
    with pytest.raises(error):
        npu_combine_tensors(tensors())


def test_get_part_out_of_range():
    with pytest.raises(ValueError, match="exceeds"):
        get_part_combined_tensor(torch.zeros(4, device="npu"), 2, 3)


# ---- CANN version ------------------------------------------------------------------------

def test_cann_version_format_and_unknown_component():
    version = get_cann_version()
    assert re.fullmatch(r"\d+\.\d+\.(RC\d+|\d+)", version)
    assert get_cann_version(module="HCCL") and get_cann_version(module="DRIVER")
    assert get_cann_version(module="CAN") == ""
    assert torch_npu.utils.collect_env.get_cann_version() == version


# ---- save_async / load --------------------------------------------------------------------

def test_save_async_tensor_and_model_round_trip(tmp_path):
    from torch_npu.utils.serialization import load, wait_for_pending_saves

    tensor = torch.rand(1024, device="npu")
    expected = tensor.cpu()
    save_async(tensor, tmp_path / "t.pt")
    tensor.add_(1)  # after the call: not in the file
    model = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).npu()
    save_async(model.state_dict(), str(tmp_path / "m.pt"), model=model)
    wait_for_pending_saves(timeout=60)
    loaded = load(tmp_path / "t.pt")
    assert loaded.device.type == "npu" and torch.equal(loaded.cpu(), expected)
    state = torch.load(tmp_path / "m.pt")
    for k, v in model.state_dict().items():
        assert torch.equal(state[k].cpu(), v.cpu())
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


def test_save_async_rejects_a_non_module_model(tmp_path):
    with pytest.raises(TypeError, match="nn.Module"):
        save_async(torch.ones(1), tmp_path / "x.pt", model="model")


# ---- thread affinity ----------------------------------------------------------------------

def test_set_and_reset_thread_affinity_of_the_calling_thread_only():
    main_cores = os.sched_getaffinity(0)
    seen = {}

    def worker():
        set_thread_affinity([0, 0])
        seen["set"] = os.sched_getaffinity(0)
        child = threading.Thread(target=lambda: seen.setdefault("child", os.sched_getaffinity(0)))
        child.start()
        child.join()
        reset_thread_affinity()
        seen["reset"] = os.sched_getaffinity(0)

    t = threading.Thread(target=worker)
    t.start()
    t.join(30)
    assert seen["set"] == {0} and seen["child"] == {0}  # threads inherit the mask
    assert seen["reset"] == main_cores
    assert os.sched_getaffinity(0) == main_cores  # the main thread was never touched


@pytest.mark.parametrize("bad", [[1, 2, 3], [], [-1, 5], [3, 1], "0-1", [[0, 1], [2]]])
def test_set_thread_affinity_rejects_bad_ranges(bad):
    with pytest.raises(ValueError, match="Invalid core range"):
        set_thread_affinity(bad)


def test_set_thread_affinity_on_missing_cores_is_a_value_error():
    before = os.sched_getaffinity(0)
    with pytest.raises(ValueError, match="cannot bind"):
        set_thread_affinity([100000, 100001])
    assert os.sched_getaffinity(0) == before


# ---- FlopsCounter -------------------------------------------------------------------------

def _conv_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).npu()


def test_flops_counter_matches_flop_counter_mode_and_pause_semantics():
    from torch.utils.flop_counter import FlopCounterMode

    model, x = _conv_mlp(), torch.randn(2, 3, 8, 8, device="npu")
    a, b = torch.randn(3, 4, 5, device="npu"), torch.randn(3, 5, 6, device="npu")

    def work():
        model(x).sum().backward()
        torch.bmm(a, b)

    with FlopCounterMode(display=False) as reference:
        work()
    expected = reference.get_total_flops()
    assert expected > 0
    counter = FlopsCounter()
    counter.start()
    work()
    assert counter.get_flops() == [expected, expected]
    counter.pause()
    work()  # e.g. recomputation: traversed only
    assert FlopsCounter().get_flops() == [expected, 2 * expected]  # one shared counter
    counter.resume()
    work()
    assert counter.get_flops() == [2 * expected, 3 * expected]
    counter.stop()
    assert counter.get_flops() == [0, 0]
    work()
    assert counter.get_flops() == [0, 0]


# ---- collect_env ----------------------------------------------------------------------------

def test_collect_env_prints_a_real_report():
    env = dict(os.environ, PYTHONPATH=REPO, PYTORCH_NPU_ALLOC_CONF="expandable_segments:True")
    out = subprocess.run([sys.executable, "-m", "torch_npu.utils.collect_env"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert f"PyTorch version: {torch.__version__}" in out.stdout
    assert f"Torch-npu version: {torch_npu.__version__}" in out.stdout
    assert get_cann_version() in out.stdout and "expandable_segments:True" in out.stdout
    assert re.search(r"Python version: 3\.\d+", out.stdout)


def test_collect_env_path_checks(tmp_path):
    from torch_npu.utils import collect_env

    collect_env.check_directory_path_readable(str(tmp_path))
    with pytest.raises(RuntimeError, match="does not exist"):
        collect_env.check_path_owner_consistent(str(tmp_path / "missing"))
    assert os.path.isfile(os.path.join(collect_env.get_torch_npu_install_path(), "__init__.py"))


# ---- NpuExtension -----------------------------------------------------------------------------

def test_npu_extension_is_a_cpp_extension_seeing_torch_npu_headers_and_runtime():
    from torch.utils.cpp_extension import include_paths as torch_includes

    from torch_npu.utils.cpp_extension import NpuExtension

    ext = NpuExtension("my_ops", ["my_ops.cpp"], extra_compile_args=["-O2"], include_dirs=["/opt/mine"])
    assert ext.name == "my_ops" and ext.sources == ["my_ops.cpp"] and ext.language == "c++"
    assert ext.include_dirs[0] == "/opt/mine"
    assert any(os.path.isfile(os.path.join(d, "torch_npu", "csrc", "core", "npu", "NPUStream.h"))
               for d in ext.include_dirs)
    assert any(os.path.isfile(os.path.join(d, "acl", "acl_base.h")) for d in ext.include_dirs)
    assert set(torch_includes()) <= set(ext.include_dirs)
    assert {"torch", "torch_npu"} <= set(ext.libraries) and "-O2" in ext.extra_compile_args
    (library_dir,) = [d for d in ext.library_dirs if os.path.isfile(os.path.join(d, "libtorch_npu.so"))]
    assert library_dir in ext.runtime_library_dirs
    with pytest.raises(TypeError):
        NpuExtension("x", "x.cpp")


# ---- SyncBatchNorm ------------------------------------------------------------------------------

def test_sync_batch_norm_single_process_equals_batch_norm_on_cpu():
    from torch_npu.utils.syncbatchnorm import SyncBatchNorm

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 2, generator=gen)
    w, b = torch.randn(3, generator=gen), torch.randn(3, generator=gen)
    grad = torch.randn(4, 3, 5, 2, generator=gen)
    leaves = [t.npu().requires_grad_() for t in (x, w, b)]
    rm, rv = torch.zeros(3, device="npu"), torch.ones(3, device="npu")
    out = SyncBatchNorm.apply(*leaves, rm, rv, 1e-5, 0.1, None, 1)
    out.backward(grad.npu())
    ref_leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ref_rm, ref_rv = torch.zeros(3), torch.ones(3)
    ref = F.batch_norm(ref_leaves[0], ref_rm, ref_rv, ref_leaves[1], ref_leaves[2], True, 0.1, 1e-5)
    ref.backward(grad)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rm.cpu(), ref_rm)
    torch.testing.assert_close(rv.cpu(), ref_rv)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)


# ---- profiler.Profile -------------------------------------------------------------------------

def test_step_profile_is_a_singleton_recording_the_chosen_step(tmp_path):
    from torch_npu.utils.profiler import Profile, Singleton

    @Singleton
    class Counter:
        def __init__(self, start=0):
            self.start = start

    assert Counter(5) is Counter(7) and Counter().start == 5
    prof = Profile(start_step=2, save_path=str(tmp_path), profile_type="TORCH")
    assert Profile() is prof
    x = torch.randn(8, 8, device="npu")
    for _ in range(3):
        prof.start()
        torch.mm(x, x)
        prof.end()
    assert prof.trace_file and os.path.isfile(prof.trace_file)
    with open(prof.trace_file) as f:
        assert "aten::mm" in f.read()


def test_import_torch_npu_loads_no_utils_or_optim():
    code = ("import sys, torch_npu; "
            "print(sorted(m for m in sys.modules if m.startswith(('torch_npu.utils', 'torch_npu.optim', "
            "'torch_npu.jit', 'torch.utils.flop_counter'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    code = "import torch_npu; print(torch_npu.utils.get_cann_version(), torch_npu.optim.NpuFusedAdam.__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [get_cann_version(), "NpuFusedAdam"]
