"""Parameters shared between modules stay shared when a module moves to or from npu.

``Module._apply`` keeps the existing Parameter objects (``param.data = converted``) only
when ``torch._has_compatible_shallow_copy_type(param, converted)`` says so; otherwise every
module gets its own new Parameter and tied weights (an embedding reused as the output
projection) come apart, so training differs from cpu. npu answers through its own kernel
for that operator, with no global switch (``torch.__future__``) touched.
"""
import copy

import pytest
import torch
from torch import nn

import torch_npu  # noqa: F401  (registers the npu device)


class TiedLM(nn.Module):
    """Embedding whose weight is also the output projection, as in GPT-2 and BERT."""

    def __init__(self, vocab: int = 16, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mix(self.embed(ids))))


def _assert_tied(model: TiedLM) -> None:
    assert model.head.weight is model.embed.weight
    assert len(list(model.parameters())) == 3


@pytest.mark.parametrize(
    "move",
    [
        pytest.param(lambda m: m.to("npu"), id="to_npu"),
        pytest.param(lambda m: m.npu(), id="npu"),
        pytest.param(lambda m: m.to("npu", torch.float64), id="to_npu_float64"),
        pytest.param(lambda m: m.npu().half(), id="npu_then_half"),
        pytest.param(lambda m: m.npu().cpu(), id="npu_then_cpu"),
    ],
)
def test_tied_weights_stay_one_parameter(move):
    model = TiedLM()
    param = model.embed.weight
    moved = move(model)
    assert moved is model
    _assert_tied(model)
    # The very Parameter object is kept (as for cuda), so an optimizer built before the
    # move still holds the model's parameters.
    assert model.embed.weight is param


def test_tied_weights_stay_one_parameter_across_devices(two_devices):
    _, npu1 = two_devices
    model = TiedLM()
    param = model.embed.weight
    model.to(npu1)
    _assert_tied(model)
    assert model.embed.weight is param and param.device == npu1
    model.to("npu:0")
    _assert_tied(model)
    assert param.device == torch.device("npu", 0)


def test_no_global_conversion_switch_is_flipped():
    before = torch.__future__.get_overwrite_module_params_on_conversion()
    TiedLM().to("npu")
    assert torch.__future__.get_overwrite_module_params_on_conversion() is before is False


def test_shallow_copy_compatibility_of_npu_tensors():
    cpu, npu = torch.ones(2), torch.ones(2, device="npu")
    assert torch._has_compatible_shallow_copy_type(cpu, npu)
    assert torch._has_compatible_shallow_copy_type(npu, cpu)
    assert torch._has_compatible_shallow_copy_type(npu, torch.ones(2, device="npu"))
    # Other kinds of tensors keep PyTorch's answer.
    assert not torch._has_compatible_shallow_copy_type(npu, torch.ones(2).to_sparse())
    assert not torch._has_compatible_shallow_copy_type(npu, torch.ones(2, device="meta"))


def test_data_assignment_between_cpu_and_npu():
    p = nn.Parameter(torch.zeros(3))
    p.data = torch.arange(3.0, device="npu")
    assert p.device.type == "npu" and p.requires_grad
    torch.testing.assert_close(p.cpu(), torch.arange(3.0), check_device=False)


def test_training_with_tied_weights_matches_cpu():
    torch.manual_seed(0)
    cpu_model = TiedLM()
    npu_model = copy.deepcopy(cpu_model).to("npu")
    _assert_tied(npu_model)
    ids = torch.randint(0, 16, (4, 6))
    target = torch.randint(0, 16, (4, 6))
    for model, opt, i, t in (
        (cpu_model, torch.optim.SGD(cpu_model.parameters(), lr=0.5), ids, target),
        (npu_model, torch.optim.SGD(npu_model.parameters(), lr=0.5), ids.npu(), target.npu()),
    ):
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(i).flatten(0, 1), t.flatten()).backward()
            opt.step()
    for p_npu, p_cpu in zip(npu_model.parameters(), cpu_model.parameters()):
        assert p_npu.device.type == "npu"
        torch.testing.assert_close(p_npu.cpu(), p_cpu, atol=1e-6, rtol=1e-5)
