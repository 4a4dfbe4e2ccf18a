"""Comparison of npu results with CPU results on the same inputs, shared by the runtime
tests: moves inputs, runs forward and backward on both devices, and checks every output
and gradient leaf."""
from __future__ import annotations

import warnings
import zlib
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

NPU = torch.device("npu", 0)


def seeded_generator(name: str) -> torch.Generator:
    """A CPU generator seeded from ``name``, so each case gets fixed, distinct inputs."""
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def to_device(tree: Any, device: torch.device) -> Any:
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, tree)


def tensor_leaves(tree: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_flatten(tree)[0] if isinstance(leaf, torch.Tensor)]


def assert_same(npu_result: Any, cpu_result: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Every leaf of ``npu_result`` lives on npu and equals the matching CPU leaf."""
    npu_leaves, npu_spec = tree_flatten(npu_result)
    cpu_leaves, cpu_spec = tree_flatten(cpu_result)
    assert npu_spec == cpu_spec, f"result structure differs: {npu_spec} vs {cpu_spec}"
    for got, want in zip(npu_leaves, cpu_leaves):
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor)
            assert got.device.type == "npu", f"result on {got.device}, expected npu"
            assert got.dtype == want.dtype
            assert got.shape == want.shape
            torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert got == want


def run_forward_backward(
    fn: Callable[..., Any],
    cpu_inputs: list[Any],
    grad: bool,
    name: str,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Run ``fn`` on CPU inputs and on their npu copies; compare outputs and, when
    ``grad``, the gradients of a fixed random weighting of the floating outputs."""
    npu_inputs = to_device(cpu_inputs, NPU)
    if grad:
        for tensors in (cpu_inputs, npu_inputs):
            for t in tensors:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    t.requires_grad_(True)
    cpu_out, cpu_warnings = _call_recording_warnings(fn, cpu_inputs)
    npu_out, npu_warnings = _call_recording_warnings(fn, npu_inputs)
    # The npu path must not warn about anything the CPU kernel is silent about.
    assert npu_warnings <= cpu_warnings, f"npu-only warnings: {sorted(npu_warnings - cpu_warnings)}"
    assert_same(tree_map(_detach, npu_out), tree_map(_detach, cpu_out), rtol, atol)
    if not grad:
        return
    cpu_float_outs = [t for t in tensor_leaves(cpu_out) if t.requires_grad]
    npu_float_outs = [t for t in tensor_leaves(npu_out) if t.requires_grad]
    assert len(cpu_float_outs) == len(npu_float_outs) > 0, "no differentiable output"
    gen = seeded_generator(name + ".weights")
    weights = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in cpu_float_outs]
    cpu_loss = sum((o * w).sum() for o, w in zip(cpu_float_outs, weights))
    npu_loss = sum((o * w.to(NPU)).sum() for o, w in zip(npu_float_outs, weights))
    cpu_loss.backward()
    npu_loss.backward()
    cpu_grads = [t.grad for t in cpu_inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    npu_grads = [t.grad for t in npu_inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    assert_same(npu_grads, cpu_grads, rtol, atol)


def _call_recording_warnings(fn: Callable[..., Any], inputs: list[Any]) -> tuple[Any, set[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*inputs)
    return out, {str(w.message) for w in caught}


def _detach(x: Any) -> Any:
    return x.detach() if isinstance(x, torch.Tensor) else x


def same_outcome(run_cpu: Callable[[], torch.Tensor], run_npu: Callable[[], torch.Tensor]) -> None:
    """run_npu gives run_cpu's result bit for bit (dtype, values, strides), or its error
    (the same first line of the message)."""
    try:
        expected = run_cpu()
    except RuntimeError as cpu_error:
        try:
            run_npu()
        except RuntimeError as npu_error:
            assert str(npu_error).splitlines()[0] == str(cpu_error).splitlines()[0]
            return
        raise AssertionError(f"cpu raised {cpu_error!r}, npu did not")
    got = run_npu()
    assert got.device.type == "npu"
    assert got.dtype == expected.dtype and got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)
