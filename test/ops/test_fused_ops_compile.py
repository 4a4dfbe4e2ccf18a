"""The fused npu_* operators under torch.library.opcheck, torch.compile(fullgraph=True) and
torch.export: fake kernels, autograd registrations, and the Inductor decompositions that
make the pointwise and normalisation operators fuse (a compiled npu_rms_norm, npu_swiglu or
npu_rotary_mul is exactly one kernel, with no opaque call left)."""
from __future__ import annotations

import pytest
import torch
from torch._inductor import metrics
from torch._inductor.utils import run_and_get_code

import torch_npu

LAUNCH = "npu_launch_host_kernel("
D = "npu"


def _opcheck_cases():
    x = torch.randn(3, 5, 8, device=D)
    w = torch.randn(8, device=D)
    q = torch.randn(2, 3, 4, 8, device=D)
    r = torch.randn(1, 3, 1, 8, device=D)
    gl = torch.tensor([2, 5, 8], device=D)
    i8 = torch.randint(-5, 5, (2, 4, 16), dtype=torch.int8, device=D)
    i8w = torch.randint(-5, 5, (16, 8), dtype=torch.int8, device=D)
    return {
        "rms_norm": (torch.ops.npu.npu_rms_norm.default, (x, w, 1e-5), {}),
        "rms_norm_backward": (torch.ops.npu.npu_rms_norm_backward.default, (x, x, w, torch.rand(3, 5, 1, device=D)), {}),
        "add_rms_norm": (torch.ops.npu.npu_add_rms_norm.default, (x, x, w), {}),
        "rotary_mul": (torch.ops.npu.npu_rotary_mul.default, (q, r, r, "interleave"), {}),
        "rotary_mul_backward": (torch.ops.npu.npu_rotary_mul_backward.default, (q, q, r, r), {}),
        "apply_rotary_pos_emb": (torch.ops.npu.npu_apply_rotary_pos_emb.default, (q, q[:, :, :2], r, r), {}),
        "swiglu": (torch.ops.npu.npu_swiglu.default, (torch.randn(3, 6, 8, device=D), 1), {}),
        "swiglu_backward": (torch.ops.npu.npu_swiglu_backward.default, (x[:, :, :4], x, -1), {}),
        "gelu": (torch.ops.npu.npu_gelu.default, (x,), {"approximate": "tanh"}),
        "gelu_backward": (torch.ops.npu.npu_gelu_backward.default, (x, x), {}),
        "silu": (torch.ops.npu.npu_silu.default, (x,), {}),
        "silu_backward": (torch.ops.npu.npu_silu_backward.default, (x, x, x), {}),
        "scaled_masked_softmax": (torch.ops.npu.npu_scaled_masked_softmax.default, (q, torch.rand(2, 1, 4, 8, device=D) > 0.5, 0.5, False), {}),
        "scaled_masked_softmax_backward": (torch.ops.npu.npu_scaled_masked_softmax_backward.default, (q, q, torch.rand(4, 8, device=D) > 0.5, 0.5, True), {}),
        "confusion_transpose": (torch.ops.npu.npu_confusion_transpose.default, (q, [0, 2, 1, 3], [2, 4, 24], True), {}),
        "confusion_transpose_backward": (torch.ops.npu.npu_confusion_transpose_backward.default, (torch.randn(2, 4, 24, device=D), [0, 2, 1, 3], [2, 3, 4, 8], False), {}),
        "dtype_cast": (torch.ops.npu.npu_dtype_cast.default, (x, torch.bfloat16), {}),
        "dtype_cast_backward": (torch.ops.npu.npu_dtype_cast_backward.default, (x, torch.float16), {}),
        "moe_gating_top_k_softmax": (torch.ops.npu.npu_moe_gating_top_k_softmax.default, (x[0], torch.rand(5, device=D) > 0.5, 2), {}),
        "moe_init_routing": (torch.ops.npu.npu_moe_init_routing.default, (x[0], torch.arange(10, dtype=torch.int32, device=D).reshape(2, 5).t().contiguous(), torch.randint(0, 3, (5, 2), dtype=torch.int32, device=D), 4), {}),
        "grouped_matmul": (torch.ops.npu.npu_grouped_matmul.default, ([torch.randn(8, 4, device=D)], [torch.randn(3, 4, 5, device=D)]), {"group_list": gl, "split_item": 3, "group_type": 0}),
        "grouped_matmul_data_dependent": (torch.ops.npu.npu_grouped_matmul.default, ([torch.randn(8, 4, device=D)], [torch.randn(4, 5, device=D)] * 3), {"group_list": gl, "group_type": 0}),
        "grouped_matmul_list": (torch.ops.npu.npu_grouped_matmul.List, ([torch.randn(8, 4, device=D)], [torch.randn(4, 5, device=D)] * 3), {"group_list": [2, 5, 8], "group_type": 0}),
        "dynamic_quant": (torch.ops.npu.npu_dynamic_quant.default, (x.half(),), {"smooth_scales": w.half()}),
        "dynamic_quant_int4": (torch.ops.npu.npu_dynamic_quant.default, (x.bfloat16(),), {"dst_type": torch.quint4x2}),
        "quant_matmul": (torch.ops.npu.npu_quant_matmul.default, (i8, i8w, torch.rand(8, device=D)), {"output_dtype": torch.bfloat16}),
    }


# Built per test, not kept: npu tensors held for the whole session would pin allocator
# segments that the memory tests expect to be free.
OPCHECK_NAMES = sorted(_opcheck_cases())
DIFFERENTIABLE = {
    "rms_norm", "rotary_mul", "swiglu", "gelu", "silu", "scaled_masked_softmax",
    "confusion_transpose", "dtype_cast",
}


@pytest.mark.parametrize("name", OPCHECK_NAMES)
def test_opcheck(name):
    op, args, kwargs = _opcheck_cases()[name]
    if name in DIFFERENTIABLE:
        args = tuple(
            a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        )
    # opcheck's test_autograd_registration handles cpu/cuda/xpu tensors only (PyTorch 2.13);
    # test_autograd_kernels below checks the same thing for npu directly.
    torch.library.opcheck(
        op, args, kwargs, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    )


def test_autograd_kernels_exist_exactly_where_ascend_has_a_backward():
    for name, (op, _args, _kwargs) in _opcheck_cases().items():
        has_autograd = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Autograd")
        assert has_autograd == (name in DIFFERENTIABLE), name


def _compile_and_code(fn, *args):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="inductor", fullgraph=True)
    out, code = run_and_get_code(compiled, *args)
    return out, "\n".join(code)


def _one_kernel_case(name):
    x = torch.randn(64, 128, device=D)
    gamma = torch.randn(128, device=D)
    if name == "rms_norm[0]":
        return (lambda x, w: torch_npu.npu_rms_norm(x, w, 1e-5)[0]), (x, gamma)
    if name == "rms_norm (y, rstd)":
        return (lambda x, w: torch_npu.npu_rms_norm(x, w, 1e-5)), (x, gamma)
    if name == "swiglu":
        return (lambda x: torch_npu.npu_swiglu(x)), (x,)
    fn = lambda x, c, s: torch_npu.npu_rotary_mul(x, c, s)  # noqa: E731
    return fn, (x.reshape(2, 4, 8, 128), torch.randn(1, 4, 1, 128, device=D), torch.randn(1, 4, 1, 128, device=D))


# Kernels are generated, not read from a cache, so the codegen metrics describe them.
_UNCACHED = {"fx_graph_cache": False}


@pytest.mark.parametrize("name", ["rms_norm[0]", "rms_norm (y, rstd)", "swiglu", "rotary_mul"])
def test_compiled_op_is_one_fused_kernel(name):
    fn, args = _one_kernel_case(name)
    metrics.reset()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(_UNCACHED):
        out, code = _compile_and_code(fn, *args)
    assert code.count(LAUNCH) == 1, code
    assert "torch.ops.npu." not in code  # decomposed, not called
    if name.startswith("rms_norm"):
        # The row reduction and the normalised output share one loop over the rows (each row
        # of x is read from memory once); rstd, when returned, is a small loop over the rows.
        inner = [c.inner_kernel_number for c in metrics.cpp_outer_loop_fused_inner_counts]
        assert inner == [2], (inner, code)
    expected = fn(*args)
    for a, b in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=1e-5, rtol=1e-5)


def test_compiled_rms_norm_training_step_shares_the_row_loop_forward_and_backward():
    # Under autograd the forward returns rstd for the backward, and the training graph's
    # common subexpression elimination runs: y must still share the reduction's row loop.
    x0, gamma0 = torch.randn(64, 128), torch.randn(128)
    x, gamma = x0.npu().requires_grad_(True), gamma0.npu().requires_grad_(True)
    grad = torch.randn(64, 128, device=D)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: torch_npu.npu_rms_norm(x, w, 1e-5)[0], backend="inductor", fullgraph=True)

    def step():
        return torch.autograd.grad(compiled(x, gamma), (x, gamma), grad)

    metrics.reset()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(_UNCACHED):
        got, codes = run_and_get_code(step)
    assert len(codes) == 2 and all(c.count(LAUNCH) == 1 for c in codes), codes
    # Forward: reduction + y; backward: the row reduction of dx + dx (dgamma, a column
    # sum, is a loop nest of its own).
    inner = [c.inner_kernel_number for c in metrics.cpp_outer_loop_fused_inner_counts]
    assert inner == [2, 2], (inner, codes)
    xe, ge = x0.npu().requires_grad_(True), gamma0.npu().requires_grad_(True)
    expected = torch.autograd.grad(torch_npu.npu_rms_norm(xe, ge, 1e-5)[0], (xe, ge), grad)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=1e-4, rtol=1e-4)


def test_mlir_backend_compiles_rms_norm_with_rstd_into_one_kernel():
    pytest.importorskip("torch_mlir")
    from torch_npu.compiler.inductor import mlir as mlir_backend

    fn, args = _one_kernel_case("rms_norm (y, rstd)")
    mlir_backend.reset_fallback_stats()
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, options={"npu_backend": "mlir", **_UNCACHED})
    with torch._functorch.config.patch(enable_autograd_cache=False):
        out, codes = run_and_get_code(compiled, *args)
    code = "\n".join(codes)
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 0, stats["reasons"]
    # The MLIR emitter has no equal-step constraint: rstd joins the row loop as well.
    assert code.count(LAUNCH) == 1 and code.count("MlirKernel(") == 1, code
    for a, b in zip(out, fn(*args)):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dim", [-1, 1])
def test_compiled_swiglu_backward_is_one_vectorised_kernel(dim):
    from torch._inductor import cpu_vec_isa

    x0 = torch.randn(4, 6, 32)
    x = x0.npu().requires_grad_(True)
    x_eager = x0.npu().requires_grad_(True)
    grad = torch.randn(torch_npu.npu_swiglu(x_eager.detach(), dim=dim).shape, device=D)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch_npu.npu_swiglu(x, dim=dim), backend="inductor", fullgraph=True)

    def step():
        return torch.autograd.grad(compiled(x), (x,), grad)[0]

    got, codes = run_and_get_code(step)
    (backward,) = [c for c in codes if "_backward" in c.split("\n", 1)[0]]
    assert backward.count(LAUNCH) == 1 and "torch.ops.npu." not in backward, backward
    if cpu_vec_isa.pick_vec_isa():
        # One plain pointwise kernel over the gradient, not a masked concatenation of the halves.
        assert "at::vec::Vectorized<float>::loadu" in backward, backward
    expected = torch.autograd.grad(torch_npu.npu_swiglu(x_eager, dim=dim), (x_eager,), grad)[0]
    torch.testing.assert_close(got.cpu(), expected.cpu(), atol=1e-5, rtol=1e-5)


def test_row_only_node_keeps_its_place_in_a_column_reduction_loop():
    # Vectorised along the columns, the reduction and the per-column pointwise node step
    # alike: the outer-loop fusion rule for row-only nodes must not split them.
    x = torch.randn(256, 64, device=D)

    def column_stats(x):
        return x.sum(0) * 2 + 1, x + x.sum(0, keepdim=True)

    metrics.reset()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(_UNCACHED):
        out, code = _compile_and_code(column_stats, x)
    inner = [c.inner_kernel_number for c in metrics.cpp_outer_loop_fused_inner_counts]
    assert inner == [2], (inner, code)
    for a, b in zip(out, column_stats(x)):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=1e-4, rtol=1e-5)


class _TinyDecoderBlock(torch.nn.Module):
    """The npu_* calls of an Ascend LLM block: norm, rotary, gated MLP, masked softmax."""

    def __init__(self, hidden=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.up = torch.nn.Linear(hidden, 4 * hidden)
        self.down = torch.nn.Linear(2 * hidden, hidden)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        normed = torch_npu.npu_rms_norm(x, self.norm, 1e-6)[0]
        q, k, v = self.qkv(normed).reshape(b, s, 3, self.heads, h // self.heads).unbind(2)
        q = torch_npu.npu_rotary_mul(q, cos, sin)
        k = torch_npu.npu_rotary_mul(k, cos, sin, "interleave")
        scores = torch.einsum("bsnd,btnd->bnst", q, k)
        probs = torch_npu.npu_scaled_masked_softmax(scores, mask, 0.5)
        attn = torch.einsum("bnst,btnd->bsnd", probs, v).reshape(b, s, h)
        y = x + attn
        mlp = self.down(torch_npu.npu_swiglu(self.up(torch_npu.npu_gelu(y))))
        return torch_npu.npu_silu(y + mlp)


def _block_inputs():
    b, s = 2, 6
    x = torch.randn(b, s, 16)
    cos, sin = torch.rand(1, s, 1, 8), torch.rand(1, s, 1, 8)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    return x, cos, sin, mask


def test_compiled_training_step_matches_eager_and_fuses_every_op():
    torch.manual_seed(0)
    block = _TinyDecoderBlock().npu()
    inputs = [t.npu() for t in _block_inputs()]
    x = inputs[0].requires_grad_(True)

    eager_out = block(*inputs)
    eager_out.sum().backward()
    eager_grads = [p.grad.clone() for p in block.parameters()] + [x.grad.clone()]
    for p in block.parameters():
        p.grad = None
    x.grad = None

    torch._dynamo.reset()
    compiled = torch.compile(block, backend="inductor", fullgraph=True)

    def step():
        out = compiled(*inputs)
        out.sum().backward()
        return out

    out, codes = run_and_get_code(step)
    code = "\n".join(codes)
    torch.testing.assert_close(out.detach().cpu(), eager_out.detach().cpu(), atol=1e-5, rtol=1e-4)
    grads = [p.grad for p in block.parameters()] + [x.grad]
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g.cpu(), e.cpu(), atol=1e-4, rtol=1e-4)
    # Forward and backward are both decomposed: no npu operator is called opaquely.
    assert "torch.ops.npu." not in code


def test_remaining_decomposed_ops_compile_without_an_opaque_call():
    x1, x2 = torch.randn(2, 4, 16, device=D), torch.randn(2, 4, 16, device=D)
    gamma = torch.rand(16, device=D) + 0.5
    q, k = torch.randn(2, 4, 2, 16, device=D), torch.randn(2, 4, 1, 16, device=D)
    cos, sin = torch.rand(2, 4, 1, 16, device=D), torch.rand(2, 4, 1, 16, device=D)

    def rest(x1, x2, gamma, q, k, cos, sin):
        y, rstd, residual = torch_npu.npu_add_rms_norm(x1, x2, gamma)
        moved = torch_npu.npu_confusion_transpose(y, [0, 2, 1], [2, 16, 4], False)
        q, k = torch_npu.npu_apply_rotary_pos_emb(q.clone(), k.clone(), cos, sin)
        return torch_npu.npu_dtype_cast(moved, torch.bfloat16), rstd, residual, q, k

    expected = rest(x1, x2, gamma, q, k, cos, sin)
    got, code = _compile_and_code(rest, x1, x2, gamma, q, k, cos, sin)
    assert "torch.ops.npu." not in code
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=1e-5, rtol=1e-5)


def _moe(x, w, activations, weight_int8, weight_scale):
    """MoE routing, the grouped expert matmul and a per-token quantised projection."""
    probs, experts, rows = torch_npu.npu_moe_gating_top_k_softmax(x[:, :4], None, 2)
    expanded, expanded_rows, sorted_experts = torch_npu.npu_moe_init_routing(x, rows, experts, 6)
    counts = torch.bincount(sorted_experts, minlength=4)
    (out,) = torch_npu.npu_grouped_matmul(
        [expanded], [w], group_list=counts.cumsum(0), split_item=3, group_type=0
    )
    # A graph input: Inductor keeps float16 intermediates in float32 inside a fused
    # kernel, which would change what is quantised.
    q, scale = torch_npu.npu_dynamic_quant(activations)
    projected = torch_npu.npu_quant_matmul(
        q, weight_int8, weight_scale, pertoken_scale=scale, output_dtype=torch.float16
    )
    return out, probs, q, scale, projected


def _moe_inputs():
    return (
        torch.randn(6, 8, device=D),
        torch.randn(4, 8, 5, device=D),
        torch.randn(12, 5, device=D).half(),
        torch.randint(-5, 5, (5, 3), dtype=torch.int8, device=D),
        torch.rand(3, device=D) / 10,
    )


def test_compile_keeps_the_routing_and_quantised_ops_as_calls_and_matches_eager():
    inputs = _moe_inputs()
    expected = _moe(*inputs)
    got, code = _compile_and_code(_moe, *inputs)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.cpu(), b.cpu())
    for name in ("npu_moe_gating_top_k_softmax", "npu_moe_init_routing", "npu_grouped_matmul", "npu_quant_matmul"):
        assert f"torch.ops.npu.{name}" in code
    assert "torch.ops.npu.npu_dynamic_quant" not in code  # decomposed


def test_export_keeps_npu_operators_and_runs():
    torch.manual_seed(0)
    block = _TinyDecoderBlock().npu().eval()
    inputs = tuple(t.npu() for t in _block_inputs())
    exported = torch.export.export(block, inputs)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    for name in ("npu_rms_norm", "npu_rotary_mul", "npu_scaled_masked_softmax", "npu_swiglu", "npu_gelu", "npu_silu"):
        assert f"npu.{name}.default" in targets, targets
    torch.testing.assert_close(exported.module()(*inputs).cpu(), block(*inputs).cpu())


def test_export_of_the_remaining_operators_keeps_them_and_runs():
    class Rest(torch.nn.Module):
        def forward(self, x1, x2, gamma, x, w, activations, weight_int8, weight_scale):
            y, rstd, residual = torch_npu.npu_add_rms_norm(x1, x2, gamma)
            moved = torch_npu.npu_confusion_transpose(y, [0, 2, 1], [2, 16, 4], False)
            cast = torch_npu.npu_dtype_cast(moved, torch.bfloat16)
            return (cast, rstd, residual) + _moe(x, w, activations, weight_int8, weight_scale)

    inputs = (
        torch.randn(2, 4, 16, device=D), torch.randn(2, 4, 16, device=D), torch.rand(16, device=D) + 0.5,
    ) + _moe_inputs()
    exported = torch.export.export(Rest(), inputs)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    for name in (
        "npu_add_rms_norm", "npu_confusion_transpose", "npu_dtype_cast", "npu_moe_gating_top_k_softmax",
        "npu_moe_init_routing", "npu_grouped_matmul", "npu_dynamic_quant", "npu_quant_matmul",
    ):
        assert f"npu.{name}.default" in targets, (name, targets)
    for a, b in zip(exported.module()(*inputs), Rest()(*inputs)):
        torch.testing.assert_close(a.cpu(), b.cpu())


def test_export_of_in_place_rotary_embedding_records_the_mutation():
    class Rope(torch.nn.Module):
        def forward(self, q, k, cos, sin):
            torch_npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
            return q * 1, k * 1

    q, k = torch.randn(1, 4, 2, 8, device=D), torch.randn(1, 4, 2, 8, device=D)
    cos, sin = torch.rand(1, 4, 1, 8, device=D), torch.rand(1, 4, 1, 8, device=D)
    exported = torch.export.export(Rope(), (q.clone(), k.clone(), cos, sin))
    copies = [n for n in exported.graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert sorted(n.args[0].name for n in copies) == ["k", "q"]
    # Functionalised, the program returns the new query and key as input mutations.
    functional = exported.run_decompositions()
    mutated = functional.graph_signature.user_inputs_to_mutate
    assert set(mutated.values()) == {"q", "k"}
    q2, k2 = q.clone(), k.clone()
    exported.module()(q2, k2, cos, sin)
    expected_q, expected_k = torch.ops.npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(q2.cpu(), expected_q.cpu())
    torch.testing.assert_close(k2.cpu(), expected_k.cpu())


def test_fake_tensor_mode_as_documented_for_npu_dtype_cast():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.rand(2, dtype=torch.float32).npu()
        result = torch_npu.npu_dtype_cast(x, torch.float16)
    assert result.dtype == torch.float16 and result.device.type == "npu" and tuple(result.shape) == (2,)
