"""torch.save / torch.load of npu tensors and modules, with and without map_location."""
from __future__ import annotations

import io

import pytest
import torch


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_tensor_roundtrip_keeps_device_and_values():
    x = torch.randn(3, 4, device="npu")
    y = _roundtrip(x)
    assert y.device == x.device
    torch.testing.assert_close(y, x)


def test_views_keep_sharing_after_load():
    base = torch.arange(12.0, device="npu")
    view = base[2:6]
    base2, view2 = _roundtrip((base, view))
    assert view2.untyped_storage().data_ptr() == base2.untyped_storage().data_ptr()
    view2.fill_(0)
    assert base2[2:6].sum().item() == 0


@pytest.mark.parametrize(
    "map_location, expected",
    [
        ("cpu", torch.device("cpu")),
        (torch.device("cpu"), torch.device("cpu")),
        ("npu:0", torch.device("npu", 0)),
        ("npu", torch.device("npu", 0)),
        (torch.device("npu", 0), torch.device("npu", 0)),
        # A callable receives the storage already restored on CPU.
        (lambda storage, loc: storage, torch.device("cpu")),
    ],
)
def test_map_location(map_location, expected):
    x = torch.randn(5, device="npu:0")
    y = _roundtrip(x, map_location=map_location)
    assert y.device == expected
    torch.testing.assert_close(y.cpu(), x.cpu())


def test_map_location_to_other_npu(two_devices):
    x = torch.randn(5, device="npu:0")
    assert _roundtrip(x, map_location="npu:1").device == torch.device("npu", 1)
    assert _roundtrip(x, map_location={"npu:0": "npu:1"}).device == torch.device("npu", 1)
    assert _roundtrip(torch.randn(2), map_location="npu:1").device == torch.device("npu", 1)


def test_load_onto_missing_device_is_an_error():
    x = torch.randn(2, device="npu")
    with pytest.raises(RuntimeError, match="npu"):
        _roundtrip(x, map_location=f"npu:{torch.npu.device_count() + 3}")


def test_module_state_dict_roundtrip():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).npu()
    state = _roundtrip(model.state_dict(), weights_only=True)
    clone = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).npu()
    clone.load_state_dict(state)
    x = torch.randn(3, 4, device="npu")
    torch.testing.assert_close(clone(x), model(x))
    assert all(v.device.type == "npu" for v in state.values())
