"""Conformance matrix: a broad set of ops run on npu must give the CPU results on the
same inputs, forward and backward, for the dtypes each op supports."""
from __future__ import annotations

import unittest
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from parameterized import parameterized

from npu_runtime_compare import run_forward_backward, seeded_generator

F32, F64, F16, BF16, I64, I32, BOOL = torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool

LOW_PRECISION_TOL = {F16: (1e-2, 1e-2), BF16: (2e-2, 2e-2)}


@dataclass
class OpCase:
    """One op under test: how to call it, what to feed it, and whether to check grads."""

    name: str
    fn: Callable[..., Any]
    shapes: list[Any]
    dtypes: tuple[torch.dtype, ...] = (F32,)
    grad: bool = True
    # Input value domain: "any" (randn), "positive" (0.5..2.5), "unit" (-0.9..0.9),
    # "int" (0..9), "bool".
    domain: str = "any"
    extra: Callable[[torch.Generator], list[Any]] = field(default=lambda gen: [])


def _make(shape: Any, dtype: torch.dtype, domain: str, gen: torch.Generator) -> torch.Tensor:
    if dtype == BOOL or domain == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point:
        low = 1 if domain == "positive" else 0
        return torch.randint(low, 10, shape, generator=gen, dtype=dtype)
    if domain == "positive":
        t = torch.rand(shape, generator=gen, dtype=F64) * 2 + 0.5
    elif domain == "unit":
        t = torch.rand(shape, generator=gen, dtype=F64) * 1.8 - 0.9
    elif domain == "int":
        t = torch.randint(0, 10, shape, generator=gen).to(F64)
    else:
        t = torch.randn(shape, generator=gen, dtype=F64)
    return t.to(dtype)


def _idx(*values: int) -> Callable[[torch.Generator], list[Any]]:
    return lambda gen: [torch.tensor(values)]


S = (4, 5)
CASES: list[OpCase] = [
    # pointwise unary
    OpCase("abs", torch.abs, [S], (F32, F64, BF16, F16, I64)),
    OpCase("neg", torch.neg, [S], (F32, BF16, I32)),
    OpCase("exp", torch.exp, [S], (F32, F64, BF16)),
    OpCase("log", torch.log, [S], (F32, F64), domain="positive"),
    OpCase("sqrt", torch.sqrt, [S], (F32, BF16), domain="positive"),
    OpCase("rsqrt", torch.rsqrt, [S], domain="positive"),
    OpCase("reciprocal", torch.reciprocal, [S], domain="positive"),
    OpCase("sin", torch.sin, [S], (F32, F64, F16)),
    OpCase("cos", torch.cos, [S]),
    OpCase("tanh", torch.tanh, [S], (F32, BF16)),
    OpCase("sigmoid", torch.sigmoid, [S], (F32, F16)),
    OpCase("relu", torch.relu, [S], (F32, BF16)),
    OpCase("gelu", F.gelu, [S]),
    OpCase("silu", F.silu, [S]),
    OpCase("erf", torch.erf, [S]),
    OpCase("asin", torch.asin, [S], domain="unit"),
    OpCase("floor", torch.floor, [S], grad=False),
    OpCase("round", torch.round, [S], grad=False),
    OpCase("sign", torch.sign, [S], (F32, I64), grad=False),
    OpCase("clamp", lambda x: torch.clamp(x, -0.5, 0.5), [S], (F32, I64)),
    OpCase("pow_scalar", lambda x: x**3, [S], (F32, I64)),
    OpCase("nan_to_num", lambda x: torch.nan_to_num(x / 0.0), [S], grad=False),
    # pointwise binary / ternary
    OpCase("add", torch.add, [S, S], (F32, F64, F16, BF16, I64, I32)),
    OpCase("add_alpha", lambda a, b: torch.add(a, b, alpha=2), [S, S], (F32, I64)),
    OpCase("add_broadcast", torch.add, [(4, 1), (1, 5)]),
    OpCase("add_scalar", lambda a: a + 3, [S], (F32, I64)),
    OpCase("sub", torch.sub, [S, S], (F32, I64)),
    OpCase("mul", torch.mul, [S, S], (F32, F64, BF16, I64, BOOL)),
    OpCase("div", torch.div, [S, S], (F32, F64), domain="positive"),
    OpCase("floor_divide", torch.floor_divide, [S, S], (I64,), grad=False, domain="positive"),
    OpCase("remainder", torch.remainder, [S, S], (F32,), grad=False, domain="positive"),
    OpCase("pow", torch.pow, [S, S], domain="positive"),
    OpCase("atan2", torch.atan2, [S, S]),
    OpCase("maximum", torch.maximum, [S, S], (F32, I64)),
    OpCase("minimum", torch.minimum, [S, S]),
    OpCase("lerp", lambda a, b: torch.lerp(a, b, 0.3), [S, S]),
    OpCase("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [S, S, S]),
    OpCase("where", lambda a, b: torch.where(a > 0, a, b), [S, S]),
    OpCase("eq", torch.eq, [S, S], (F32, I64), grad=False, domain="int"),
    OpCase("lt", torch.lt, [S, S], (F32, I64), grad=False),
    OpCase("ge_scalar", lambda a: a >= 0.1, [S], grad=False),
    OpCase("logical_and", torch.logical_and, [S, S], (BOOL,)),
    OpCase("bitwise_xor", torch.bitwise_xor, [S, S], (I64, I32, BOOL)),
    OpCase("isclose", lambda a, b: torch.isclose(a, b, atol=0.5), [S, S], grad=False),
    OpCase("type_promotion", lambda a: a * 1.5 + torch.ones(5, dtype=F64, device=a.device), [S], (I64,), grad=False),
    OpCase("to_dtype", lambda a: (a.to(F16), a.to(I32), a.to(BF16)), [S], grad=False),
    # reductions
    OpCase("sum", torch.sum, [S], (F32, F64, BF16, I64, BOOL)),
    OpCase("sum_dim", lambda x: x.sum(dim=1, keepdim=True), [S], (F32, I64)),
    OpCase("mean", lambda x: x.mean(dim=0), [S], (F32, F64, BF16)),
    OpCase("prod", lambda x: x.prod(dim=1), [S]),
    OpCase("max_dim", lambda x: torch.max(x, dim=1), [S], (F32, I64)),
    OpCase("min", torch.min, [S], (F32, I64)),
    OpCase("amax", lambda x: x.amax(dim=(0, 1)), [(3, 4, 5)]),
    OpCase("argmax", lambda x: x.argmax(dim=1), [S], grad=False),
    OpCase("argmin", torch.argmin, [S], grad=False),
    OpCase("std", lambda x: x.std(dim=1), [S], (F32, F64)),
    OpCase("var_mean", lambda x: torch.var_mean(x, dim=0, correction=0), [S]),
    OpCase("norm", lambda x: torch.linalg.vector_norm(x, ord=2, dim=1), [S]),
    OpCase("logsumexp", lambda x: torch.logsumexp(x, dim=1), [S]),
    OpCase("cumsum", lambda x: torch.cumsum(x, dim=1), [S], (F32, I64)),
    OpCase("cumprod", lambda x: torch.cumprod(x, dim=0), [S]),
    OpCase("softmax", lambda x: torch.softmax(x, dim=-1), [S], (F32, F64, BF16)),
    OpCase("log_softmax", lambda x: F.log_softmax(x, dim=0), [S]),
    OpCase("all_any", lambda x: (x.all(), x.any(dim=1)), [S], (BOOL,), grad=False),
    OpCase("topk", lambda x: torch.topk(x, 3, dim=1), [S]),
    OpCase("sort", lambda x: torch.sort(x, dim=1, descending=True), [S]),
    OpCase("unique", lambda x: torch.unique(x, return_counts=True), [S], (I64,), grad=False),
    OpCase("count_nonzero", torch.count_nonzero, [S], (I64,), grad=False),
    # matmul, conv and nn layers
    OpCase("mm", torch.mm, [(6, 7), (7, 5)], (F32, F64, BF16)),
    OpCase("bmm", torch.bmm, [(3, 4, 6), (3, 6, 2)]),
    OpCase("matmul_broadcast", torch.matmul, [(2, 3, 4, 6), (6, 5)]),
    OpCase("matvec", torch.mv, [(4, 6), (6,)]),
    OpCase("addmm", torch.addmm, [(5,), (3, 4), (4, 5)]),
    OpCase("linear", F.linear, [(8, 6), (4, 6), (4,)], (F32, BF16)),
    OpCase("einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
    OpCase("int_mm", torch.mm, [(4, 3), (3, 5)], (I64,), grad=False),
    OpCase("conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=1), [(2, 3, 10), (4, 3, 3), (4,)]),
    OpCase("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [(2, 3, 8, 8), (5, 3, 3, 3), (5,)], (F32, F64)),
    OpCase("conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2, dilation=2), [(1, 4, 9, 9), (6, 2, 3, 3)]),
    OpCase("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2), [(1, 3, 5, 5), (3, 2, 3, 3)]),
    OpCase("max_pool2d", lambda x: F.max_pool2d(x, 2), [(2, 3, 8, 8)]),
    OpCase("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), [(2, 3, 8, 8)]),
    OpCase("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 3)), [(2, 3, 7, 7)]),
    OpCase("batch_norm_train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(4, 3, 5, 5), (3,), (3,)]),
    OpCase("layer_norm", lambda x, w, b: F.layer_norm(x, (6,), w, b), [(4, 5, 6), (6,), (6,)], (F32, BF16)),
    OpCase("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3, 3)]),
    OpCase("embedding", lambda w: F.embedding(torch.tensor([[1, 3], [0, 9]], device=w.device), w), [(10, 4)]),
    OpCase("cross_entropy", lambda x: F.cross_entropy(x, torch.tensor([1, 0, 4, 2], device=x.device)), [S]),
    OpCase("mse_loss", F.mse_loss, [S, S]),
    OpCase("smooth_l1_loss", F.smooth_l1_loss, [S, S]),
    OpCase("interpolate_bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [(1, 2, 4, 4)]),
    OpCase("scaled_dot_product_attention", F.scaled_dot_product_attention, [(2, 3, 5, 8), (2, 3, 5, 8), (2, 3, 5, 8)]),
    # linear algebra, spectral, more nn functions
    OpCase("linalg_inv", lambda x: torch.linalg.inv(x + 4 * torch.eye(4, device=x.device)), [(4, 4)], (F32, F64)),
    OpCase("linalg_solve", lambda a, b: torch.linalg.solve(a + 4 * torch.eye(4, device=a.device), b), [(4, 4), (4, 2)]),
    OpCase("det", lambda x: torch.linalg.det(x + 3 * torch.eye(3, device=x.device)), [(2, 3, 3)]),
    OpCase("cholesky", lambda x: torch.linalg.cholesky(x @ x.mT + torch.eye(4, device=x.device)), [(4, 4)], (F64,)),
    OpCase("qr", lambda x: torch.linalg.qr(x).R.abs(), [(5, 3)], grad=False),
    OpCase("rfft", lambda x: torch.view_as_real(torch.fft.rfft(x)), [(4, 8)], grad=False),
    OpCase("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2), [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    OpCase("cdist", torch.cdist, [(5, 3), (4, 3)]),
    OpCase("embedding_bag", lambda w: F.embedding_bag(torch.tensor([1, 2, 4, 5, 4, 3], device=w.device), w, torch.tensor([0, 3], device=w.device)), [(10, 3)]),
    OpCase("nll_loss", lambda x: F.nll_loss(F.log_softmax(x, 1), torch.tensor([0, 2, 1, 4], device=x.device)), [S]),
    OpCase("kl_div", lambda a, b: F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="batchmean"), [S, S]),
    OpCase("bce_with_logits", lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()), [S, S]),
    OpCase("activations", lambda x: (F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x), F.hardtanh(x), F.mish(x)), [S]),
    OpCase("logit", torch.logit, [S], domain="unit"),
    OpCase("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=0.3), [S, S, S], domain="positive"),
    OpCase("median_kthvalue", lambda x: (x.median(dim=1), torch.kthvalue(x, 2, dim=1)), [S]),
    OpCase("quantile", lambda x: torch.quantile(x, torch.tensor([0.25, 0.5], device=x.device), dim=1), [S]),
    OpCase("histc", lambda x: torch.histc(x, bins=5, min=-2, max=2), [(50,)], grad=False),
    OpCase("bucketize_searchsorted", lambda x: (torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0], device=x.device)), torch.searchsorted(torch.sort(x.flatten()).values, x)), [S], grad=False),
    OpCase("clamp_tensor_bounds", lambda x, lo: torch.clamp(x, min=lo, max=lo + 1), [S, S]),
    # indexing
    OpCase("index_select", lambda x: x.index_select(0, torch.tensor([3, 0, 3], device=x.device)), [S]),
    OpCase("gather", lambda x: torch.gather(x, 1, torch.tensor([[0, 4], [1, 1], [2, 0], [3, 3]], device=x.device)), [S]),
    OpCase("scatter_add", lambda x, s: x.scatter_add(0, torch.tensor([[0, 1, 2, 3, 0]], device=x.device), s), [S, (1, 5)]),
    OpCase("index_add", lambda x, s: x.index_add(0, torch.tensor([1, 1], device=x.device), s), [S, (2, 5)]),
    OpCase("masked_fill", lambda x: x.masked_fill(x > 0, -1.0), [S]),
    OpCase("masked_select", lambda x: x.masked_select(x > 0), [S]),
    OpCase("bool_index", lambda x: x[x[:, 0] > 0], [S]),
    OpCase("advanced_index", lambda x: x[torch.tensor([0, 2], device=x.device), 1:4], [S]),
    OpCase("index_put", lambda x, v: x.index_put((torch.tensor([0, 3], device=x.device),), v), [S, (2, 5)]),
    OpCase("take", lambda x: torch.take(x, torch.tensor([0, 7, 19], device=x.device)), [S]),
    OpCase("nonzero", torch.nonzero, [S], (I64, BOOL), grad=False),
    OpCase("tril_triu", lambda x: (x.tril(), x.triu(1)), [(5, 5)]),
    OpCase("roll_flip", lambda x: (x.roll(2, 1), x.flip(0)), [S]),
    OpCase("cat_stack", lambda a, b: (torch.cat([a, b], 1), torch.stack([a, b])), [S, S], (F32, I64)),
    OpCase("split_chunk", lambda x: (*x.split(2, dim=1), *x.chunk(2)), [S]),
    OpCase("repeat", lambda x: x.repeat(2, 3), [(2, 3)]),
    OpCase("pad", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [S]),
    OpCase("one_hot", lambda x: F.one_hot(x, 10), [(6,)], (I64,), grad=False),
    # views: results and gradients through views
    OpCase("view_reshape", lambda x: (x.view(20), x.reshape(2, 10), x.flatten()), [S]),
    OpCase("transpose_permute", lambda x: (x.transpose(0, 2), x.permute(2, 0, 1), x.mT), [(2, 3, 4)]),
    OpCase("squeeze_unsqueeze", lambda x: (x.unsqueeze(1), x.squeeze(1)), [(3, 1, 4)]),
    OpCase("expand", lambda x: x.expand(3, 4, 5) * 2, [(4, 1)]),
    OpCase("slice_step", lambda x: x[::2, 1::2], [(6, 7)]),
    OpCase("diagonal", lambda x: torch.diagonal(x, offset=1), [(5, 5)]),
    OpCase("as_strided", lambda x: x.as_strided((3, 3), (1, 3), 1), [(4, 5)]),
    OpCase("unfold", lambda x: x.unfold(1, 2, 2), [S]),
    OpCase("noncontiguous_op", lambda x: x.t().contiguous() + x.t().exp(), [S], (F32, I64)),
    OpCase("view_as_complex_real", lambda x: torch.view_as_real(torch.view_as_complex(x) * 2), [(4, 2)], grad=False),
    # in-place (on fresh copies so autograd sees non-leaf tensors)
    OpCase("add_", lambda x, y: x.clone().add_(y, alpha=2), [S, S], (F32, I64)),
    OpCase("mul_div_", lambda x: x.clone().mul_(3).div_(2), [S]),
    OpCase("clamp_", lambda x: x.clone().clamp_(min=0), [S]),
    OpCase("zero_fill_", lambda x: (x.clone().zero_(), x.clone().fill_(7)), [S], (F32, I64), grad=False),
    OpCase("index_fill_", lambda x: x.clone().index_fill_(1, torch.tensor([0, 2], device=x.device), -2.0), [S]),
    OpCase("inplace_on_view", lambda x: _inplace_on_view(x), [S]),
    OpCase("copy_", lambda x, y: x.clone().copy_(y.t()), [S, (5, 4)]),
    OpCase("mul_exp_", lambda x: x.clone().mul_(0.5).exp_(), [S]),
]


def _inplace_on_view(x: torch.Tensor) -> torch.Tensor:
    base = x.clone()
    base[1:3, ::2].mul_(10)
    base.t()[0].add_(1)
    return base


def _expand_cases() -> list[tuple[str, OpCase, torch.dtype]]:
    params = []
    for case in CASES:
        for dtype in case.dtypes:
            params.append((f"{case.name}_{str(dtype).removeprefix('torch.')}", case, dtype))
    return params


class NpuOpConformanceTest(unittest.TestCase):
    @parameterized.expand(_expand_cases)
    def test_matches_cpu(self, label: str, case: OpCase, dtype: torch.dtype) -> None:
        gen = seeded_generator(label)
        inputs = [_make(shape, dtype, case.domain, gen) for shape in case.shapes]
        grad = case.grad and dtype.is_floating_point
        rtol, atol = LOW_PRECISION_TOL.get(dtype, (None, None))
        run_forward_backward(case.fn, inputs, grad, label, rtol, atol)


class NpuViewStorageTest(unittest.TestCase):
    """A view is metadata over its base's storage: same storage object, writes are shared."""

    @parameterized.expand(
        [
            ("view", lambda x: x.view(4, 6)),
            ("transpose", lambda x: x.t()),
            ("slice", lambda x: x[1:, ::2]),
            ("select", lambda x: x[2]),
            ("narrow", lambda x: x.narrow(1, 1, 3)),
            ("unsqueeze", lambda x: x.unsqueeze(0)),
            ("expand", lambda x: x[:1].expand(5, 6)),
            ("diagonal", lambda x: x.diagonal()),
            ("as_strided", lambda x: x.as_strided((2, 2), (6, 1), 3)),
            ("view_dtype", lambda x: x.view(torch.int32)),
            ("unflatten", lambda x: x.unflatten(1, (2, 3))),
            ("detach", lambda x: x.detach()),
            ("alias_reshape", lambda x: x.reshape(24)),
        ]
    )
    def test_view_shares_storage(self, _name: str, make_view: Callable[[torch.Tensor], torch.Tensor]) -> None:
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6).to("npu")
        view = make_view(base)
        self.assertEqual(view.device, base.device)
        self.assertIs(view.untyped_storage(), base.untyped_storage())
        self.assertEqual(view.untyped_storage().data_ptr(), base.untyped_storage().data_ptr())
        # The same view on CPU has the same geometry.
        cpu_view = make_view(torch.arange(24, dtype=torch.float32).reshape(4, 6))
        self.assertEqual(view.shape, cpu_view.shape)
        self.assertEqual(view.stride(), cpu_view.stride())
        self.assertEqual(view.storage_offset(), cpu_view.storage_offset())

    def test_write_through_view_reaches_base(self) -> None:
        base = torch.zeros(4, 6, device="npu")
        base.t()[2].fill_(5)
        base[1:3, 4:].add_(1)
        expected = torch.zeros(4, 6)
        expected.t()[2].fill_(5)
        expected[1:3, 4:].add_(1)
        torch.testing.assert_close(base.cpu(), expected)

    def test_view_of_view_keeps_base(self) -> None:
        base = torch.randn(3, 4, device="npu")
        v = base.t()[1:]
        self.assertIs(v._base, base)
        self.assertTrue(v._is_view())

    def test_inplace_resize_and_set(self) -> None:
        x = torch.empty(0, device="npu")
        x.resize_(3, 4).fill_(2)
        self.assertEqual(x.sum().item(), 24)
        y = torch.empty(0, device="npu")
        y.set_(x.untyped_storage(), 4, (2, 2), (4, 1))
        self.assertIs(y.untyped_storage(), x.untyped_storage())
        torch.testing.assert_close(y.cpu(), torch.full((2, 2), 2.0))


class NpuRandomTest(unittest.TestCase):
    """Random ops on npu are reproducible under a seed, per device and per generator."""

    RANDOM_OPS = [
        ("rand", lambda g: torch.rand(100, device="npu", generator=g)),
        ("randn", lambda g: torch.randn(10, 10, device="npu", generator=g)),
        ("randint", lambda g: torch.randint(0, 50, (64,), device="npu", generator=g)),
        ("randperm", lambda g: torch.randperm(30, device="npu", generator=g)),
        ("normal_", lambda g: torch.empty(50, device="npu").normal_(2.0, 3.0, generator=g)),
        ("uniform_", lambda g: torch.empty(50, device="npu").uniform_(-1, 1, generator=g)),
        ("bernoulli", lambda g: torch.bernoulli(torch.full((64,), 0.3, device="npu"), generator=g)),
        ("multinomial", lambda g: torch.multinomial(torch.ones(10, device="npu"), 5, generator=g)),
        ("exponential_", lambda g: torch.empty(20, device="npu").exponential_(generator=g)),
    ]

    @parameterized.expand(RANDOM_OPS)
    def test_default_generator_seed_reproducible(self, _name: str, op: Callable[[Any], torch.Tensor]) -> None:
        torch.npu.manual_seed(1234)
        first = op(None)
        torch.npu.manual_seed(1234)
        second = op(None)
        self.assertEqual(first.device.type, "npu")
        torch.testing.assert_close(first, second)
        torch.npu.manual_seed(4321)
        third = op(None)
        if third.numel() > 1 and _name not in ("multinomial",):
            self.assertFalse(torch.equal(first, third), "a different seed gave the same numbers")

    @parameterized.expand(RANDOM_OPS)
    def test_explicit_generator_reproducible(self, _name: str, op: Callable[[Any], torch.Tensor]) -> None:
        g = torch.Generator(device="npu")
        g.manual_seed(7)
        first = op(g)
        g.manual_seed(7)
        torch.testing.assert_close(first, op(g))

    def test_dropout_reproducible_and_grad_matches_mask(self) -> None:
        x = torch.ones(200, device="npu", requires_grad=True)
        torch.npu.manual_seed(3)
        y1 = F.dropout(x, 0.5)
        torch.npu.manual_seed(3)
        y2 = F.dropout(x, 0.5)
        torch.testing.assert_close(y1, y2)
        y1.sum().backward()
        torch.testing.assert_close(x.grad, (y1 != 0).float() * 2)

    def test_get_set_rng_state_replays(self) -> None:
        state = torch.npu.get_rng_state()
        a = torch.randn(16, device="npu")
        torch.npu.set_rng_state(state)
        torch.testing.assert_close(a, torch.randn(16, device="npu"))

    def test_torch_manual_seed_seeds_npu(self) -> None:
        torch.manual_seed(99)
        a = torch.rand(8, device="npu")
        torch.manual_seed(99)
        torch.testing.assert_close(a, torch.rand(8, device="npu"))
        self.assertEqual(torch.npu.initial_seed(), 99)


class NpuGeneratorStateTest(unittest.TestCase):
    """Per-device default generators: state save/restore for all devices, seeding every
    device, and the graph-safe state the compile layer's RNG handling needs."""

    def test_default_generators_one_per_device(self) -> None:
        gens = torch.npu.default_generators
        self.assertEqual(len(gens), torch.npu.device_count())
        for index, gen in enumerate(gens):
            self.assertEqual(gen.device, torch.device("npu", index))
        self.assertEqual(torch.npu._get_generator(torch.device("npu", 0)).device, gens[0].device)

    def test_get_set_rng_state_all(self) -> None:
        states = torch.npu.get_rng_state_all()
        first = [torch.rand(4, device=f"npu:{i}") for i in range(torch.npu.device_count())]
        torch.npu.set_rng_state_all(states)
        again = [torch.rand(4, device=f"npu:{i}") for i in range(torch.npu.device_count())]
        for a, b in zip(first, again):
            torch.testing.assert_close(a, b)

    def test_manual_seed_all_and_seed_all(self) -> None:
        torch.npu.manual_seed_all(11)
        self.assertTrue(all(g.initial_seed() == 11 for g in torch.npu.default_generators))
        torch.npu.seed_all()
        seeds = {g.initial_seed() for g in torch.npu.default_generators}
        self.assertEqual(len(seeds), 1)
        torch.npu.seed()
        self.assertIsInstance(torch.npu.initial_seed(), int)

    def test_devices_have_independent_generators(self) -> None:
        if torch.npu.device_count() < 2:
            self.skipTest("needs two npu devices")
        torch.npu.manual_seed_all(5)
        a0 = torch.rand(8, device="npu:0")
        a1 = torch.rand(8, device="npu:1")
        torch.testing.assert_close(a0.cpu(), a1.cpu())  # same seed, separate streams of numbers
        torch.npu.manual_seed_all(5)
        torch.rand(100, device="npu:1")
        torch.testing.assert_close(torch.rand(8, device="npu:0"), a0)

    def test_graphsafe_state(self) -> None:
        gen = torch.npu._get_generator(torch.device("npu", 0))
        saved = gen.clone_state()
        first = torch.rand(8, device="npu:0")
        gen.graphsafe_set_state(saved)
        torch.testing.assert_close(torch.rand(8, device="npu:0"), first)
        self.assertIsInstance(gen.graphsafe_get_state(), torch.Generator)
