"""npu_fused_attention_score (forward and backward against a float64 softmax-attention
reference with the same dropout mask) and npu_mm_all_reduce_base (the matmul variants against
float64, the all-reduce on a 1-rank and a 2-rank hccl group)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch
from npu_ops_compare import assert_close, opcheck

import torch_npu

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def attention_reference(q, k, v, mask, scale, keep, keep_prob):
    probs = torch.softmax(q @ k.transpose(-1, -2) * scale + mask, -1)
    ctx = (probs * keep / keep_prob) @ v
    b, n, s, d = ctx.shape
    return ctx.permute(0, 2, 1, 3).reshape(b * s, n * d)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("transposed", [False, True])
def test_fused_attention_score_forward_and_backward(dtype, transposed):
    torch.manual_seed(1)
    q0, k0, v0 = torch.randn(2, 3, 8, 4), torch.randn(2, 3, 8, 4), torch.randn(2, 3, 8, 5)
    mask = torch.where(torch.rand(2, 1, 8, 8) > 0.8, -10000.0, 0.0)
    keep_prob = 0.75
    given = [t.transpose(-1, -2).contiguous() if transposed else t for t in (q0, k0, v0)]
    q, k, v = (t.to(dtype).npu().requires_grad_(True) for t in given)
    flags = dict(query_transpose=transposed, key_transpose=transposed, value_transpose=transposed)
    torch.manual_seed(5)
    out = torch_npu.npu_fused_attention_score(q, k, v, mask.to(dtype).npu(), 0.5, keep_prob, **flags)
    torch.manual_seed(5)
    _ctx, probs, keep = torch.ops.npu.npu_fused_attention_score_fwd(q.detach(), k.detach(), v.detach(), mask.to(dtype).npu(), 0.5, keep_prob, **flags)
    assert out.shape == (16, 15) and keep.dtype == torch.uint8
    rq, rk, rv = (t.to(dtype).double().requires_grad_(True) for t in (q0, k0, v0))
    ref = attention_reference(rq, rk, rv, mask.to(dtype).double(), 0.5, keep.cpu().double(), keep_prob)
    assert_close(out, ref, dtype, scale=10)
    seed = torch.randn(16, 15)
    out.backward(seed.to(dtype).npu())
    ref.backward(seed.to(dtype).double())
    for got, want in ((q.grad, rq.grad), (k.grad, rk.grad), (v.grad, rv.grad)):
        got = got.transpose(-1, -2) if transposed else got
        assert_close(got, want, dtype, scale=20)


def test_fused_attention_score_errors_and_opcheck():
    q = torch.randn(1, 2, 4, 8, device="npu")
    with pytest.raises(ValueError, match="bmm_score_transpose_a=True"):
        torch_npu.npu_fused_attention_score(q, q, q, torch.zeros(1, 2, 4, 4, device="npu"), 0.1, 1.0, bmm_score_transpose_a=True)
    with pytest.raises(ValueError, match="keep_prob=0.0"):
        torch_npu.npu_fused_attention_score(q, q, q, torch.zeros(1, 2, 4, 4, device="npu"), 0.1, 0.0)
    torch.library.opcheck(torch.ops.npu.npu_fused_attention_score_fwd.default, (q, q, q, torch.zeros(1, 2, 4, 4, device="npu"), 0.1, 1.0),
                          test_utils=("test_schema", "test_faketensor"))
    opcheck(torch.ops.npu.npu_fused_attention_score_backward.default,
            (torch.randn(4, 16, device="npu"), torch.rand(1, 2, 4, 4, device="npu"), q, q, q, torch.ones(1, 2, 4, 4, dtype=torch.uint8, device="npu"), 0.1, 1.0))


MM_ALL_REDUCE_CHILD = """
import json, os, sys, torch, torch_npu, torch.distributed as dist
rank, world, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.npu.set_device(rank % torch.npu.device_count())
dist.init_process_group("hccl", init_method="file://" + path, rank=rank, world_size=world)
hcom = dist.group.WORLD._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
g = torch.Generator().manual_seed(rank)
x1 = torch.randn(3, 4, 16, generator=g).half()
x2 = torch.randint(-8, 8, (16, 6), generator=g, dtype=torch.int8)
scale = (torch.rand(6, generator=g) / 10).half()
bias = torch.randn(6, generator=g).half()
out = torch_npu.npu_mm_all_reduce_base(x1.npu(), x2.npu(), hcom, reduce_op="sum", bias=bias.npu(), antiquant_scale=scale.npu())
local = x1.double() @ (x2.double() * scale.double()) + bias.double()
print("RESULT " + json.dumps({"rank": rank, "out": out.cpu().double().tolist(), "local": local.tolist()}))
dist.destroy_process_group()
"""


def run_ranks(world: int) -> list[dict]:
    import json

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]),
                   TORCH_NPU_DEVICE_COUNT="2", TORCH_NPU_MEMORY_CAPACITY_MB="512", OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(MM_ALL_REDUCE_CHILD), str(r), str(world), store],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for r in range(world)]
        results = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=180)
                assert p.returncode == 0, err[-4000:]
                line = next(line for line in out.splitlines() if line.startswith("RESULT "))
                results.append(json.loads(line[len("RESULT "):]))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    return sorted(results, key=lambda r: r["rank"])


@pytest.mark.parametrize("world", [1, 2])
def test_mm_all_reduce_base_sums_each_ranks_dequantised_matmul(world):
    results = run_ranks(world)
    total = sum(torch.tensor(r["local"]) for r in results)
    for r in results:
        assert_close(torch.tensor(r["out"]), total, torch.float16, scale=4 * world)


def test_mm_all_reduce_base_needs_a_process_group_and_checks_arguments():
    x = torch.randn(4, 8, dtype=torch.float16, device="npu")
    w = torch.randn(8, 3, dtype=torch.float16, device="npu")
    with pytest.raises(RuntimeError, match="torch.distributed is not initialised"):
        torch_npu.npu_mm_all_reduce_base(x, w, "hccl_0_1")
    with pytest.raises(ValueError, match="reduce_op='max' is not supported"):
        torch_npu.npu_mm_all_reduce_base(x, w, "hccl_0_1", reduce_op="max")
    with pytest.raises(ValueError, match="needs antiquant_scale"):
        torch_npu.npu_mm_all_reduce_base(x, w.to(torch.int8), "hccl_0_1")
    # the fake kernel alone (no collective) for shapes and dtypes
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fx, fw = torch.empty(2, 4, 8, dtype=torch.int8, device="npu"), torch.empty(8, 3, dtype=torch.int8, device="npu")
        out = torch.ops.npu.npu_mm_all_reduce_base(fx, fw, "g", dequant_scale=torch.empty(3, dtype=torch.bfloat16, device="npu"))
        assert out.shape == (2, 4, 3) and out.dtype == torch.bfloat16
