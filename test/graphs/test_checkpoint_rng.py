"""Activation checkpointing with dropout inside, compiled on npu.

With ``preserve_rng_state=True`` the recomputation in backward must draw the forward's
numbers. Through the RNG higher-order ops (``aot_eager``; Inductor with
``fallback_random=True``) results and gradients equal npu eager for the same seed; with
Inductor's own RNG (the graph-safe path) the recomputed mask is the forward's, checked by
the gradient being zero exactly where the output was dropped, also under reduce-overhead.
The first path goes through ``run_and_save_rng_state``/``run_with_rng_state``, whose npu
support is the ``rng_prims_npu`` patch.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _block(x, w):
    return F.dropout(torch.tanh(x @ w), p=0.5, training=True) * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_checkpointed_dropout_matches_eager(backend):
    # fallback_random=True makes AOT autograd's partitioner keep eager's RNG for recomputed
    # random ops (run_and_save_rng_state / run_with_rng_state) instead of graph-safe
    # generator states of their own, for aot_eager too; Inductor then also draws with the
    # eager kernels. This is how bitwise agreement with eager is asked for on CUDA as well.
    from torch._inductor import config

    def run(fn):
        torch.manual_seed(0)
        x = torch.randn(8, 16, device="npu")
        w = torch.randn(16, 16, device="npu", requires_grad=True)
        torch.npu.manual_seed(7)
        out = fn(x, w)
        out.sum().backward()
        return out.detach().cpu(), w.grad.cpu()

    def model(x, w):
        return checkpoint(_block, x, w, use_reentrant=False, preserve_rng_state=True)

    eager_out, eager_grad = run(model)
    with config.patch(fallback_random=True):
        compiled_out, compiled_grad = run(torch.compile(model, backend=backend))
    from torch._dynamo.utils import counters

    assert counters["aot_autograd"]["total"] >= 1
    torch.testing.assert_close(compiled_out, eager_out)
    torch.testing.assert_close(compiled_grad, eager_grad)
    # Dropout did drop: about half the outputs are zero.
    assert 0.3 < (eager_out == 0).float().mean() < 0.7


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_graph_safe_rng_recomputes_the_forward_mask(mode):
    def model(x, w):
        return checkpoint(_block, x, w, use_reentrant=False, preserve_rng_state=True)

    compiled = torch.compile(model, mode=mode)
    torch.manual_seed(0)
    w = torch.randn(16, 16, device="npu", requires_grad=True)
    for step in range(3):
        torch.npu.mark_step_begin()
        x = torch.randn(8, 16, device="npu", requires_grad=True)
        w.grad = None
        out = compiled(x, w)
        # d out / d x is zero exactly where the forward dropped (tanh' is never zero here).
        out.backward(torch.ones_like(out))
        dropped = (out == 0).cpu()
        assert 0.3 < dropped.float().mean() < 0.7, step
        # Each x row's grad is (mask * 2/(1-p) * tanh') @ w.T: recompute it from the
        # forward's own mask and compare.
        with torch.no_grad():
            h = torch.tanh(x @ w)
            mask = (~dropped).npu().float()
            expected = ((mask * 4) * (1 - h * h)) @ w.T
        torch.testing.assert_close(x.grad.cpu(), expected.cpu(), atol=1e-4, rtol=1e-4)
    if mode == "reduce-overhead":
        from torch_npu.compiler import graph_trees

        stats = graph_trees.get_manager(0).stats
        assert stats["records"] == 2 and stats["replays"] >= 2, stats


def test_eager_checkpoint_restores_the_npu_rng_for_the_recomputation():
    # torch.utils.checkpoint saves device RNG states only when device_module._initialized
    # says the device is in use; without it the recomputed mask differed from the forward's.
    torch.manual_seed(0)
    x = torch.randn(8, 16, device="npu")
    w = torch.randn(16, 16, device="npu", requires_grad=True)
    out = checkpoint(_block, x, w, use_reentrant=False, preserve_rng_state=True)
    out.sum().backward()
    with torch.no_grad():
        h = torch.tanh(x @ w)
        expected = x.T @ ((out != 0).float() * 4 * (1 - h * h))
    torch.testing.assert_close(w.grad.cpu(), expected.cpu(), atol=1e-4, rtol=1e-4)
    assert torch.npu._initialized
