"""Sparse COO tensors on npu work as on CUDA: creation, conversion, coalescing, products,
autograd and serialization give the cpu results and keep their parts on npu."""
from __future__ import annotations

import io

import pytest
import torch

DENSE = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])


def _assert_sparse_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.is_sparse and got.device.type == "npu"
    assert got._indices().device.type == "npu" and got._values().device.type == "npu"
    torch.testing.assert_close(got.to_dense().cpu(), want.to_dense())


def test_to_sparse_indices_values_to_dense():
    s = DENSE.npu().to_sparse()
    want = DENSE.to_sparse()
    _assert_sparse_same(s, want)
    c = s.coalesce()
    assert c.is_coalesced()
    torch.testing.assert_close(c.indices().cpu(), want.coalesce().indices())
    torch.testing.assert_close(c.values().cpu(), want.coalesce().values())
    assert c.indices().device.type == "npu"
    torch.testing.assert_close(s.to_dense().cpu(), DENSE)


def test_sparse_coo_tensor_on_npu_and_coalesce_sums_duplicates():
    i = torch.tensor([[0, 0, 1], [1, 1, 0]])
    v = torch.tensor([1.0, 2.0, 3.0])
    s = torch.sparse_coo_tensor(i, v, (2, 2), device="npu")
    assert s.device.type == "npu" and not s.is_coalesced()
    c = s.coalesce()
    torch.testing.assert_close(c.values().cpu(), torch.tensor([3.0, 3.0]))
    torch.testing.assert_close(c.to_dense().cpu(), torch.sparse_coo_tensor(i, v, (2, 2)).to_dense())


def test_sparse_mm_forward_and_backward():
    a = DENSE.to_sparse().requires_grad_()
    w = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()
    an = DENSE.npu().to_sparse().requires_grad_()
    wn = w.detach().npu().requires_grad_()
    out, out_n = torch.sparse.mm(a, w), torch.sparse.mm(an, wn)
    torch.testing.assert_close(out_n.cpu(), out)
    out.sum().backward()
    out_n.sum().backward()
    torch.testing.assert_close(wn.grad.cpu(), w.grad)
    _assert_sparse_same(an.grad, a.grad)


@pytest.mark.parametrize(
    "fn",
    [lambda s: s + s, lambda s: s * 2, lambda s: s.t(), lambda s: torch.sparse.sum(s, 1),
     lambda s: torch.mv(s, torch.ones(3, device=s.device)), lambda s: s.clone().zero_()],
)
def test_sparse_ops_match_cpu(fn):
    got, want = fn(DENSE.npu().to_sparse()), fn(DENSE.to_sparse())
    if want.is_sparse:
        _assert_sparse_same(got, want)
    else:
        torch.testing.assert_close(got.cpu(), want)


def test_moves_and_serialization():
    s = DENSE.to_sparse().npu()
    _assert_sparse_same(s, DENSE.to_sparse())
    assert s.cpu().device.type == "cpu"
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    _assert_sparse_same(torch.load(buf), DENSE.to_sparse())
