"""cpu tensors given to npu operators: accepted where CUDA's kernels accept them (advanced
indexing with cpu indices and masks, cpu scalars), refused with CUDA's text elsewhere."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _x():
    return torch.arange(20.0).reshape(4, 5)


@pytest.mark.parametrize(
    "name, fn",
    [
        ("long_index", lambda x, cpu: x[cpu(torch.tensor([0, 2]))]),
        ("randperm", lambda x, cpu: x[cpu(torch.randperm(4, generator=torch.Generator().manual_seed(1)))]),
        ("bool_mask", lambda x, cpu: x[cpu(torch.tensor([True, False, True, False]))]),
        ("elementwise_mask", lambda x, cpu: x[cpu(torch.arange(20).reshape(4, 5) % 3 == 0)]),
        ("two_indices", lambda x, cpu: x[cpu(torch.tensor([0, 3])), cpu(torch.tensor([1, 4]))]),
        ("index_and_slice", lambda x, cpu: x[1:, cpu(torch.tensor([0, 2]))]),
        ("index_method", lambda x, cpu: torch.ops.aten.index(x, [cpu(torch.tensor([1]))])),
        ("cpu_scalar", lambda x, cpu: x * cpu(torch.tensor(2.0))),
        ("where_cpu_scalar", lambda x, cpu: torch.where(x > 3, x, cpu(torch.tensor(-1.0)))),
    ],
)
def test_reads_accepting_cpu_tensors(name, fn):
    keep = lambda t: t  # noqa: E731  (index stays on cpu)
    got = fn(_x().npu(), keep)
    assert got.device.type == "npu"
    torch.testing.assert_close(got.cpu(), fn(_x(), keep))


@pytest.mark.parametrize(
    "name, fn",
    [
        ("index_put_value", lambda x: x.__setitem__(torch.tensor([1, 3]), torch.tensor(7.0).to(x.device))),
        ("index_put_scalar", lambda x: x.__setitem__(torch.tensor([0, 2]), 5.0)),
        ("mask_put", lambda x: x.__setitem__(torch.arange(20).reshape(4, 5) > 12, -1.0)),
        ("index_put_accumulate", lambda x: x.index_put_((torch.tensor([0, 0]),), torch.ones(5).to(x.device), accumulate=True)),
        ("index_put_cpu_scalar_value", lambda x: x.index_put_((torch.tensor([1]),), torch.tensor(3.0))),
    ],
)
def test_writes_accepting_cpu_indices(name, fn):
    got, want = _x().npu(), _x()
    fn(got)
    fn(want)
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize(
    "name, fn, arg",
    [
        ("index_select", lambda x: x.index_select(0, torch.tensor([1])), "index"),
        ("take", lambda x: torch.take(x, torch.tensor([1])), "index"),
        ("gather", lambda x: torch.gather(x, 1, torch.tensor([[0], [1], [2], [3]])), "index"),
        ("embedding", lambda x: torch.nn.functional.embedding(torch.tensor([1]), x), "index"),
        ("mm", lambda x: x @ torch.ones(5, 2), "mat2"),
    ],
)
def test_refused_with_cudas_same_device_text(name, fn, arg):
    with pytest.raises(RuntimeError, match=rf"Expected all tensors to be on the same device.*{arg} is on cpu.*npu:0"):
        fn(_x().npu())


def test_tensor_iterator_refuses_cpu_tensors_that_are_not_scalars():
    with pytest.raises(RuntimeError, match=r"found at least two devices, npu:0 and cpu!"):
        _x().npu() + torch.ones(5)
    with pytest.raises(RuntimeError, match=r"found at least two devices, npu:0 and cpu!"):
        _x().npu().index_put_((torch.tensor([1]),), torch.ones(5))


def test_indices_on_another_npu_device(two_devices):
    d0, d1 = two_devices
    x = _x().to(d0)
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the indexed tensor \(npu:0\)"):
        x[torch.tensor([0, 2], device=d1)]
    # index_put_ moves indices of any device to the indexed tensor's, as on CUDA.
    x[torch.tensor([0], device=d1)] = 9.0
    assert x[0].sum().item() == 45.0
    with pytest.raises(RuntimeError, match=r"npu:0 and npu:1"):
        x + torch.ones(4, 5, device=d1)


def test_exempt_table_matches_installed_torch():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cuda_device_check_table.py"), "--check"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
