"""OpInfo's scaled_dot_product_attention samples on npu equal cpu bit for bit.

Every sample of ``op_db``'s ``nn.functional.scaled_dot_product_attention`` entry, in every
dtype cpu supports, runs forward and backward on cpu and on npu from the same inputs and
output gradient; outputs and input gradients compare with ``torch.equal``. Samples with
dropout draw on both devices from one stream: npu seeded, cpu loaded with the engine state
npu's generator draws from at that seed (``philox_reference``). The OpInfo's own op is not
called: it seeds both devices with ``torch.manual_seed(42)``, under which npu's Philox
stream and cpu's Twister differ, as CUDA's and cpu's do.
"""
from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import torch_npu  # noqa: F401
from philox_reference import twister_state

NPU = torch.device("npu", 0)
SDPA = next(op for op in op_db if op.name == "nn.functional.scaled_dot_product_attention")


def _to(value, device):
    if isinstance(value, torch.Tensor):
        leaf = value.detach().to(device)
        return leaf.requires_grad_(value.requires_grad)
    return value


def _run(sample, device, seed):
    args = [_to(sample.input, device)] + [_to(a, device) for a in sample.args]
    kwargs = {k: _to(v, device) for k, v in sample.kwargs.items()}
    # cpu draws from the engine state of the npu stream at (seed, offset 0): same keep-masks.
    torch.set_rng_state(twister_state(seed, 0)) if device == "cpu" else torch.npu.manual_seed(seed)
    out = torch.nn.functional.scaled_dot_product_attention(*args, **kwargs)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.dtype)
    grads = torch.autograd.grad(out, leaves, grad_out.to(device)) if leaves else ()
    return out, grads


@pytest.mark.parametrize("dtype", sorted(SDPA.supported_dtypes("cpu"), key=str), ids=str)
def test_every_sample_forward_and_backward_bit_equal(dtype):
    samples = list(SDPA.sample_inputs("cpu", dtype, requires_grad=True))
    assert samples
    with_dropout = 0
    for i, sample in enumerate(samples):
        with_dropout += sample.kwargs.get("dropout_p", 0.0) > 0
        want, want_grads = _run(sample, "cpu", seed=i)
        got, got_grads = _run(sample, NPU, seed=i)
        assert got.device == NPU
        assert torch.equal(got.cpu(), want), f"sample {i} ({sample.kwargs}): output differs"
        assert len(got_grads) == len(want_grads) > 0
        for a, b in zip(got_grads, want_grads):
            assert torch.equal(a.cpu(), b), f"sample {i} ({sample.kwargs}): gradient differs"
    assert with_dropout > 0, "no sample with dropout: the seeded path went untested"
