"""torch.npu.make_graphed_callables: forward and backward replayed as NPU graphs, compared
with the same training run on CPU eager."""
import copy

import torch

from graphs_compare import assert_close_to_cpu


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def test_graphed_module_trains_like_cpu():
    cpu_model = _model()
    npu_model = copy.deepcopy(cpu_model).npu()
    sample = torch.randn(5, 8, device="npu")
    graphed = torch.npu.make_graphed_callables(npu_model, (sample,))

    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    npu_opt = torch.optim.SGD(graphed.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(5, 8)
        for model, opt, inp in ((cpu_model, cpu_opt, x), (graphed, npu_opt, x.npu())):
            opt.zero_grad(set_to_none=True)
            loss = (model(inp) ** 2).mean()
            loss.backward()
            opt.step()
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu, p_cpu, rtol=1e-5, atol=1e-5)


def test_graphed_function_forward_only_inputs():
    def fn(a, b):
        return (a * b).sum(dim=0), a - b

    a = torch.randn(4, 3, device="npu", requires_grad=True)
    b = torch.randn(4, 3, device="npu")
    graphed = torch.npu.make_graphed_callables(fn, (a, b))
    for _ in range(2):
        a_cpu, b_cpu = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
        a_npu = a_cpu.detach().npu().requires_grad_()
        out = graphed(a_npu, b_cpu.npu())
        ref = fn(a_cpu, b_cpu)
        assert_close_to_cpu([o.detach() for o in out], [r.detach() for r in ref])
        (out[0].sum() + out[1].sum()).backward()
        (ref[0].sum() + ref[1].sum()).backward()
        assert_close_to_cpu(a_npu.grad, a_cpu.grad)


def test_graphed_module_in_other_mode_runs_eagerly():
    model = _model().npu()
    graphed = torch.npu.make_graphed_callables(model, (torch.randn(2, 8, device="npu"),))
    graphed.eval()
    x = torch.randn(3, 8)  # another shape: only the eager forward accepts it
    with torch.no_grad():
        out = graphed(x.npu())
    ref = _model()(x)  # same seed: the parameters the graphed module started from
    assert_close_to_cpu(out, ref.detach())


def test_two_graphed_callables_share_a_pool():
    torch.manual_seed(1)
    cpu_a = torch.nn.Linear(6, 6)
    cpu_b = torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(6, 2))
    npu_a, npu_b = copy.deepcopy(cpu_a).npu(), copy.deepcopy(cpu_b).npu()
    xa = torch.randn(3, 6, device="npu", requires_grad=True)
    xb = torch.randn(3, 6, device="npu", requires_grad=True)
    ga, gb = torch.npu.make_graphed_callables((npu_a, npu_b), ((xa,), (xb,)))
    for _ in range(3):
        x = torch.randn(3, 6)
        for a, b in ((cpu_a, cpu_b), (npu_a, npu_b)):
            a.zero_grad(set_to_none=True)
            b.zero_grad(set_to_none=True)
        out_npu = gb(ga(x.npu().requires_grad_()))
        out_cpu = cpu_b(cpu_a(x.requires_grad_()))
        assert_close_to_cpu(out_npu.detach(), out_cpu.detach(), rtol=1e-5, atol=1e-5)
        out_npu.square().sum().backward()
        out_cpu.square().sum().backward()
        for m_cpu, m_npu in ((cpu_a, npu_a), (cpu_b, npu_b)):
            for p_cpu, p_npu in zip(m_cpu.parameters(), m_npu.parameters()):
                assert_close_to_cpu(p_npu.grad, p_cpu.grad, rtol=1e-5, atol=1e-5)
