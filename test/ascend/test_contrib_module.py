"""torch_npu.contrib.module: each layer on npu, forward and backward, against an independent
plain-PyTorch reference written here (run on cpu), the way Ascend's tests are written."""
import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F

import torch_npu
from torch_npu.contrib import module as M
from torch_npu.testing.common_utils import create_common_tensor
from torch_npu.testing.testcase import TestCase, run_tests


def npu_leaf(cpu_tensor):
    return cpu_tensor.detach().clone().npu().requires_grad_(True)


def cpu_leaf(cpu_tensor):
    return cpu_tensor.detach().clone().requires_grad_(True)


# --- ChannelShuffle ------------------------------------------------------------------------

def shuffle_reference(x1, x2, groups):
    """torchvision's channel_shuffle of the concatenation: view, transpose, flatten."""
    x = torch.cat([x1, x2], 1)
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class TestChannelShuffle(TestCase):
    def run_case(self, groups, split_shuffle, training):
        cpu1, _ = create_common_tensor([np.float32, 0, (2, 6, 3, 3)], -1, 1)
        cpu2, _ = create_common_tensor([np.float32, 0, (2, 6, 3, 3)], -1, 1)
        layer = M.ChannelShuffle(12, groups=groups, split_shuffle=split_shuffle).train(training)
        x1, x2 = npu_leaf(cpu1), npu_leaf(cpu2)
        out = layer(x1, x2)
        r1, r2 = cpu_leaf(cpu1), cpu_leaf(cpu2)
        expected = shuffle_reference(r1, r2, groups)
        if split_shuffle:
            expected = expected.chunk(2, dim=1)
            for got, want in zip(out, expected):
                self.assertEqual(got.device.type, "npu")
                self.assertRtolEqual(got.cpu(), want.detach())
        else:
            self.assertRtolEqual(out.cpu(), expected.detach())
        grads = [torch.randn_like(t) for t in (expected if split_shuffle else [expected])]
        torch.autograd.backward(list(expected) if split_shuffle else [expected], grads)
        torch.autograd.backward(list(out) if split_shuffle else [out], [g.npu() for g in grads])
        self.assertRtolEqual(x1.grad.cpu(), r1.grad)
        self.assertRtolEqual(x2.grad.cpu(), r2.grad)

    def test_split_shuffle_two_groups_trains(self):
        self.run_case(2, True, True)

    def test_full_shuffle_three_groups_trains(self):
        self.run_case(3, False, True)

    def test_split_shuffle_four_groups_eval(self):
        self.run_case(4, True, False)

    def test_the_indices_follow_the_input_device(self):
        layer = M.ChannelShuffle(4)
        layer(torch.randn(1, 2, 2, 2).npu(), torch.randn(1, 2, 2, 2).npu())
        self.assertEqual(layer.fp_index1.device.type, "npu")
        self.assertEqual(layer.bp_index2.device.type, "npu")

    def test_wrong_channel_count_is_a_clear_error(self):
        with self.assertRaisesRegex(ValueError, "in_channels / 2 = 4"):
            M.ChannelShuffle(8)(torch.randn(1, 3, 2, 2).npu(), torch.randn(1, 4, 2, 2).npu())
        with self.assertRaisesRegex(ValueError, "multiple of groups"):
            M.ChannelShuffle(10, groups=4)


# --- Focus ---------------------------------------------------------------------------------

class TestFocus(TestCase):
    def test_focus_is_space_to_depth_then_conv_bn_leaky_relu(self):
        cpu_x, _ = create_common_tensor([np.float32, 0, (2, 3, 6, 8)], -1, 1)
        layer = M.Focus(3, 5, k=3).npu()
        reference = torch.nn.Sequential(torch.nn.Conv2d(12, 5, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(5),
                                        torch.nn.LeakyReLU(0.1))
        reference[0].weight.data.copy_(layer.conv.conv.weight.detach().cpu())
        x, rx = npu_leaf(cpu_x), cpu_leaf(cpu_x)
        out = layer(x)
        phases = [rx[:, :, 0::2, 0::2], rx[:, :, 1::2, 0::2], rx[:, :, 0::2, 1::2], rx[:, :, 1::2, 1::2]]
        expected = reference(torch.cat(phases, 1))
        self.assertEqual(tuple(out.shape), (2, 5, 3, 4))
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        out.sum().backward()
        expected.sum().backward()
        self.assertRtolEqual(x.grad.cpu(), rx.grad)
        self.assertRtolEqual(layer.conv.conv.weight.grad.cpu(), reference[0].weight.grad)

    def test_conv_fuseforward_skips_batch_norm_and_autopad(self):
        self.assertEqual(torch_npu.contrib.module.focus.autopad(3), 1)
        self.assertEqual(torch_npu.contrib.module.focus.autopad((3, 5)), [1, 2])
        conv = torch_npu.contrib.module.focus.Conv(2, 4, k=1, act=False).npu()
        x = torch.randn(1, 2, 3, 3).npu()
        self.assertRtolEqual(conv.fuseforward(x).cpu(), F.conv2d(x.cpu(), conv.conv.weight.detach().cpu()))


# --- LabelSmoothingCrossEntropy ------------------------------------------------------------

class TestLabelSmoothingCrossEntropy(TestCase):
    def test_matches_cross_entropy_with_the_same_smoothed_target(self):
        classes, smooth = 7, 0.2
        cpu_pred, _ = create_common_tensor([np.float32, 0, (5, classes)], -3, 3)
        target = torch.tensor([0, 3, 6, 2, 2])
        pred = npu_leaf(cpu_pred)
        loss = M.LabelSmoothingCrossEntropy(classes, smooth)(pred, target.npu())
        # Ascend spreads smooth / (C - 1) over the wrong classes; F.cross_entropy spreads
        # label_smoothing / C over all classes: the same target for label_smoothing = s * C / (C - 1).
        ref_pred = cpu_leaf(cpu_pred)
        expected = F.cross_entropy(ref_pred, target, label_smoothing=smooth * classes / (classes - 1))
        self.assertEqual(loss.dtype, torch.float32)
        self.assertRtolEqual(loss.detach().cpu(), expected.detach())
        loss.backward()
        expected.backward()
        self.assertRtolEqual(pred.grad.cpu(), ref_pred.grad)

    def test_without_smoothing_it_is_cross_entropy(self):
        cpu_pred, npu_pred = create_common_tensor([np.float32, 0, (4, 10)], -2, 2)
        target = torch.tensor([9, 0, 4, 1])
        loss = M.LabelSmoothingCrossEntropy(10)(npu_pred, target.npu())
        self.assertRtolEqual(loss.cpu(), F.cross_entropy(cpu_pred, target))


# --- activations and BiLSTM ----------------------------------------------------------------

class TestActivations(TestCase):
    def test_mish_and_silu_against_their_formulas(self):
        cpu_x, _ = create_common_tensor([np.float32, 0, (4, 5)], -4, 4)
        for layer, formula in ((M.Mish(), lambda t: t * torch.tanh(F.softplus(t))),
                               (M.SiLU(), lambda t: t * torch.sigmoid(t)),
                               (M.Swish(), lambda t: t * torch.sigmoid(t))):
            x, rx = npu_leaf(cpu_x), cpu_leaf(cpu_x)
            out, expected = layer(x), formula(rx)
            self.assertRtolEqual(out.detach().cpu(), expected.detach())
            out.sum().backward()
            expected.sum().backward()
            self.assertRtolEqual(x.grad.cpu(), rx.grad)


class TestBiLSTM(TestCase):
    def test_equals_a_bidirectional_lstm_with_the_same_weights(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            layer = M.BiLSTM(4, 3)
        reference = torch.nn.LSTM(4, 3, bidirectional=True)
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(reference, name).data.copy_(getattr(layer.fw_rnn, name).data)
            getattr(reference, name + "_reverse").data.copy_(getattr(layer.bw_rnn, name).data)
        layer = layer.npu()
        cpu_x, _ = create_common_tensor([np.float32, 0, (5, 2, 4)], -1, 1)
        x, rx = npu_leaf(cpu_x), cpu_leaf(cpu_x)
        out, (expected, _) = layer(x), reference(rx)
        self.assertEqual(tuple(out.shape), (5, 2, 6))
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
        self.assertRtolEqual(x.grad.cpu(), rx.grad)

    def test_warns_that_it_is_deprecated(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            M.BiLSTM(2, 2)
        self.assertTrue(any(issubclass(w.category, FutureWarning) and "deprecated" in str(w.message) for w in caught))


# --- dropouts ------------------------------------------------------------------------------

class TestNpuCachedDropout(TestCase):
    def setUp(self):
        super().setUp()
        M.NpuCachedDropout.task_dict.clear()

    def test_mask_statistics_and_scaling(self):
        p = 0.3
        x = torch.ones(20000).npu().requires_grad_(True)
        out = M.NpuCachedDropout(p)(x)
        kept = out.detach().cpu() != 0
        self.assertLess(abs(kept.float().mean().item() - (1 - p)), 0.02)
        self.assertRtolEqual(out.detach().cpu()[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
        out.sum().backward()
        self.assertRtolEqual(x.grad.cpu(), kept.float() / (1 - p))

    def test_eval_mode_and_p_zero_are_the_identity(self):
        x = torch.randn(64).npu()
        self.assertIs(M.NpuCachedDropout(0.5).eval()(x), x)
        self.assertIs(M.NpuFairseqDropout(0.0)(x), x)
        self.assertIsNone(M.NpuCachedDropout(0.5).eval()([(2, 3), torch.float32, "npu"]))

    def test_reproducible_under_a_seed(self):
        x = torch.randn(512).npu()
        torch.manual_seed(7)
        first = M.NpuCachedDropout(0.5)(x).cpu()
        torch.manual_seed(7)
        second = M.NpuCachedDropout(0.5)(x).cpu()
        self.assertRtolEqual(first, second)
        self.assertFalse(torch.equal(first, M.NpuCachedDropout(0.5)(x).cpu()))

    def test_a_mask_request_returns_the_keep_mask(self):
        mask = M.NpuFairseqDropout(0.25)([(4, 100), torch.float16, torch.device("npu")])
        self.assertEqual((mask.dtype, tuple(mask.shape), mask.device.type), (torch.uint8, (4, 100), "npu"))
        self.assertTrue(bool(((mask == 0) | (mask == 1)).all()))
        with self.assertRaisesRegex(RuntimeError, "Tensor, or a \\[shape, dtype, device\\]"):
            M.NpuCachedDropout(0.5)("not a tensor")

    def test_ensemble_draws_the_next_masks_after_each_forward(self):
        dropout = M.NpuCachedDropout(0.5)
        model = torch.nn.Sequential(torch.nn.Identity(), dropout).npu()
        M.NpuCachedDropout.enable_dropout_ensemble(model)
        x = torch.ones(6, 50).npu()
        model(x)  # the first pass learns that one mask of this key is needed
        (queue,) = M.NpuCachedDropout.task_dict.values()
        self.assertEqual((queue.request_count, len(queue.mask_queue)), (1, 1))
        ready_mask = queue.mask_queue[0][0].clone()
        out = model(x)  # pops the pre-drawn mask, and the hook draws the next one
        torch.npu.synchronize()
        self.assertRtolEqual(out.cpu(), ready_mask.cpu().float() * 2)
        self.assertEqual(len(queue.mask_queue), 1)


class TestNpuDropPath(TestCase):
    def setUp(self):
        super().setUp()
        M.NpuDropPath.task_dict.clear()

    def test_whole_samples_are_dropped_or_scaled(self):
        drop = 0.25
        x = torch.randn(4000, 3, 2).npu().requires_grad_(True)
        out = M.NpuDropPath(drop)(x)
        ratio = (out / x).detach().cpu().reshape(4000, -1)
        kept = ratio[:, 0] != 0
        self.assertRtolEqual(ratio[kept], torch.full_like(ratio[kept], 1 / (1 - drop)))
        self.assertTrue(bool((ratio[~kept] == 0).all()))
        self.assertLess(abs(kept.float().mean().item() - (1 - drop)), 0.03)
        out.sum().backward()
        self.assertRtolEqual(x.grad.cpu().reshape(4000, -1)[:, 0], kept.float() / (1 - drop))

    def test_eval_and_zero_probability_are_the_identity(self):
        x = torch.randn(3, 4).npu()
        self.assertIs(M.NpuDropPath(0.5).eval()(x), x)
        self.assertIs(M.NpuDropPath()(x), x)

    def test_reproducible_under_a_seed(self):
        x = torch.ones(64, 2).npu()
        torch.manual_seed(3)
        first = M.NpuDropPath(0.5)(x).cpu()
        torch.manual_seed(3)
        self.assertRtolEqual(first, M.NpuDropPath(0.5)(x).cpu())

    def test_ensemble_draws_before_the_forward(self):
        layer = M.NpuDropPath(0.5)
        model = torch.nn.Sequential(layer).npu()
        M.NpuDropPath.enable_droppath_ensemble(model)
        x = torch.ones(8, 3).npu()
        model(x)
        (queue,) = M.NpuDropPath.task_dict.values()
        self.assertEqual((queue.request_count, len(queue.rand_queue)), (1, 0))
        torch.manual_seed(11)
        out = model(x)  # the pre-hook draws the random tensor this forward then uses
        torch.manual_seed(11)
        expected = torch.floor(torch.rand(8, 1, device="npu") + 0.5) * 2
        self.assertRtolEqual(out.cpu(), expected.expand(8, 3).cpu())


class TestDropoutWithByteMask(TestCase):
    def test_statistics_eval_and_inplace(self):
        x = torch.ones(20000).npu()
        out = M.DropoutWithByteMask(p=0.4)(x)
        kept = out.cpu() != 0
        self.assertLess(abs(kept.float().mean().item() - 0.6), 0.02)
        self.assertRtolEqual(out.cpu()[kept], torch.full((int(kept.sum()),), 1 / 0.6))
        self.assertIs(M.DropoutWithByteMask(p=0.4).eval()(x), x)
        y = torch.ones(100).npu()
        self.assertIs(M.DropoutWithByteMask(p=0.5, inplace=True)(y), y)
        self.assertTrue(bool(((y == 0) | (y == 2)).all()))
        with self.assertRaisesRegex(ValueError, "in \\[0, 1\\]"):
            M.DropoutWithByteMask(p=1.5)


# --- MultiheadAttention --------------------------------------------------------------------

class TestMultiheadAttention(TestCase):
    B, T, S, E, H = 2, 3, 4, 8, 2

    def inputs(self, kdim=None):
        q, _ = create_common_tensor([np.float32, 2, (self.B * self.T, self.E)], -1, 1)
        k, _ = create_common_tensor([np.float32, 2, (self.B * self.S, kdim or self.E)], -1, 1)
        v, _ = create_common_tensor([np.float32, 2, (self.B * self.S, kdim or self.E)], -1, 1)
        return q, k, v

    def compare(self, layer, reference, q, k, v, padding=None):
        rq, rk, rv = (cpu_leaf(t) for t in (q, k, v))
        nq, nk, nv = (npu_leaf(t) for t in (q, k, v))
        out, weights = layer(nq, nk, nv, self.B, self.T, self.S,
                             key_padding_mask=None if padding is None else padding.npu())
        expected, expected_weights = reference(rq.view(self.B, self.T, -1), rk.view(self.B, self.S, -1),
                                               rv.view(self.B, self.S, -1), key_padding_mask=padding)
        self.assertRtolEqual(out.detach().cpu(), expected.reshape(self.B * self.T, self.E).detach())
        self.assertRtolEqual(weights.detach().cpu(), expected_weights.detach())
        grad = torch.randn(self.B * self.T, self.E)
        out.backward(grad.npu())
        expected.reshape(self.B * self.T, self.E).backward(grad)
        for got, want in ((nq, rq), (nk, rk), (nv, rv)):
            self.assertRtolEqual(got.grad.cpu(), want.grad)
        self.assertRtolEqual(layer.out_proj.weight.grad.cpu(), reference.out_proj.weight.grad)

    def test_fused_path_equals_torch_multihead_attention(self):
        layer = M.MultiheadAttention(self.E, self.H, dropout=0.1).eval()
        reference = torch.nn.MultiheadAttention(self.E, self.H, batch_first=True, dropout=0.1).eval()
        state = reference.state_dict()
        layer.upgrade_state_dict_named(state, "")  # in_proj_weight -> q_proj, k_proj, v_proj
        layer.load_state_dict(state)
        padding = torch.tensor([[False, False, True, True], [False, False, False, True]])
        self.compare(layer.npu(), reference, *self.inputs(), padding=padding)

    def test_kdim_bias_kv_and_zero_attention_equal_torch(self):
        layer = M.MultiheadAttention(self.E, self.H, kdim=5, vdim=5, add_bias_kv=True, add_zero_attn=True)
        reference = torch.nn.MultiheadAttention(self.E, self.H, kdim=5, vdim=5, add_bias_kv=True, add_zero_attn=True,
                                                batch_first=True)
        with torch.no_grad():
            reference.q_proj_weight.copy_(layer.q_proj.weight)
            reference.k_proj_weight.copy_(layer.k_proj.weight)
            reference.v_proj_weight.copy_(layer.v_proj.weight)
            reference.in_proj_bias.copy_(torch.cat([layer.q_proj.bias, layer.k_proj.bias, layer.v_proj.bias]))
            reference.out_proj.weight.copy_(layer.out_proj.weight)
            reference.out_proj.bias.copy_(layer.out_proj.bias)
            reference.bias_k.copy_(layer.bias_k)
            reference.bias_v.copy_(layer.bias_v)
        self.compare(layer.npu(), reference, *self.inputs(kdim=5))

    def test_additive_mask_head_weights_and_multi_attn(self):
        layer = M.MultiheadAttention(self.E, self.H).npu()
        q, k, v = (t.npu() for t in self.inputs())
        additive = torch.randn(self.B, self.H, self.T, self.S).npu()
        out, per_head = layer(q, k, v, self.B, self.T, self.S, key_padding_mask=additive, need_head_weights=True)
        self.assertEqual(tuple(per_head.shape), (self.H, self.B, self.T, self.S))
        self.assertRtolEqual(layer.multi_attn(q, k, v, additive, self.B, self.T).cpu(), out.cpu())
        # The heads' scores are q k^T / sqrt(d) + mask: check the weights against that formula.
        qh = layer.transpose_for_scores(layer.q_proj(q).view(self.B, self.T, self.E))
        kh = layer.transpose_for_scores(layer.k_proj(k).view(self.B, self.S, self.E))
        scores = qh @ kh.transpose(-1, -2) / math.sqrt(self.E // self.H) + additive
        self.assertRtolEqual(per_head.transpose(0, 1).detach().cpu(), torch.softmax(scores, -1).detach().cpu())
        self.assertIsNone(layer(q, k, v, self.B, self.T, self.S, need_weights=False)[1])

    def test_training_dropout_is_reproducible_and_drops(self):
        layer = M.MultiheadAttention(self.E, self.H, dropout=0.5).npu().train()
        q, k, v = (t.npu() for t in self.inputs())
        torch.manual_seed(5)
        first = layer(q, k, v, self.B, self.T, self.S)[0]
        torch.manual_seed(5)
        second = layer(q, k, v, self.B, self.T, self.S)[0]
        self.assertRtolEqual(first.detach().cpu(), second.detach().cpu())
        undropped = layer.eval()(q, k, v, self.B, self.T, self.S)[0]
        self.assertFalse(torch.allclose(first.detach().cpu(), undropped.detach().cpu()))

    def test_unsupported_options_say_so(self):
        with self.assertRaisesRegex(NotImplementedError, "q_noise"):
            M.MultiheadAttention(8, 2, q_noise=0.1)
        layer = M.MultiheadAttention(8, 2)
        q = torch.randn(6, 8)
        with self.assertRaisesRegex(NotImplementedError, "incremental"):
            layer(q, q, q, 2, 3, 3, incremental_state={})
        with self.assertRaisesRegex(ValueError, r"\(6, 8\) for bsz=2, tgt_len=3, s_len=3"):
            layer(torch.randn(5, 8), q, q, 2, 3, 3)

    def test_matmul_transpose_forward_and_backward(self):
        from torch_npu.contrib.module.multihead_attention import Matmul_transpose

        a, b = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
        na, nb, ra, rb = npu_leaf(a), npu_leaf(b), cpu_leaf(a), cpu_leaf(b)
        out, expected = Matmul_transpose(na, nb), ra @ rb.transpose(-2, -1)
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        out.sum().backward()
        expected.sum().backward()
        self.assertRtolEqual(na.grad.cpu(), ra.grad)
        self.assertRtolEqual(nb.grad.cpu(), rb.grad)


# --- ModulatedDeformConv -------------------------------------------------------------------

def deform_conv_reference(x, offset, mask, weight, bias, stride, padding, dilation, deformable_groups):
    """DCNv2 with mmcv's offset layout ((dy, dx) per group and kernel point), sampling through
    F.grid_sample (bilinear, zeros outside)."""
    n, c, h, w = x.shape
    out_c, _, kh, kw = weight.shape
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    cg = c // deformable_groups
    base_y = (torch.arange(oh) * stride - padding).view(1, oh, 1).float()
    base_x = (torch.arange(ow) * stride - padding).view(1, 1, ow).float()
    out = torch.zeros(n, out_c, oh, ow)
    for g in range(deformable_groups):
        for i in range(kh):
            for j in range(kw):
                k = i * kw + j
                dy = offset[:, 2 * (g * kh * kw + k)]
                dx = offset[:, 2 * (g * kh * kw + k) + 1]
                y = base_y + i * dilation + dy
                xs = base_x + j * dilation + dx
                grid = torch.stack([xs / (w - 1) * 2 - 1, y / (h - 1) * 2 - 1], dim=-1)
                sampled = F.grid_sample(x[:, g * cg:(g + 1) * cg], grid, mode="bilinear", padding_mode="zeros",
                                        align_corners=True)
                sampled = sampled * mask[:, g * kh * kw + k].unsqueeze(1)
                out = out + torch.einsum("nchw,oc->nohw", sampled, weight[:, g * cg:(g + 1) * cg, i, j])
    return out + bias.view(1, -1, 1, 1)


class TestModulatedDeformConv(TestCase):
    def run_case(self, stride, padding, dilation, deformable_groups):
        layer = M.ModulatedDeformConv(4, 3, 3, stride, padding, dilation, deformable_groups=deformable_groups,
                                      pack=False)
        layer.bias.data.uniform_(-1, 1)
        cpu_x, _ = create_common_tensor([np.float32, 0, (2, 4, 6, 6)], -1, 1)
        oh = (6 + 2 * padding - dilation * 2 - 1) // stride + 1
        cpu_offset, _ = create_common_tensor([np.float32, 0, (2, deformable_groups * 18, oh, oh)], -1.5, 1.5)
        cpu_mask, _ = create_common_tensor([np.float32, 0, (2, deformable_groups * 9, oh, oh)], 0, 1)
        inputs = [npu_leaf(t) for t in (cpu_x, cpu_offset, cpu_mask)]
        refs = [cpu_leaf(t) for t in (cpu_x, cpu_offset, cpu_mask)]
        weight, bias = cpu_leaf(layer.weight.detach()), cpu_leaf(layer.bias.detach())
        layer = layer.npu()
        out = layer(tuple(inputs))
        expected = deform_conv_reference(*refs, weight, bias, stride, padding, dilation, deformable_groups)
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        grad = torch.randn_like(expected)
        out.backward(grad.npu())
        expected.backward(grad)
        for got, want in zip(inputs, refs):
            self.assertRtolEqual(got.grad.cpu(), want.grad, prec=1e-3)
        self.assertRtolEqual(layer.weight.grad.cpu(), weight.grad, prec=1e-3)
        self.assertRtolEqual(layer.bias.grad.cpu(), bias.grad)

    def test_offsets_and_masks_forward_and_backward(self):
        self.run_case(stride=1, padding=1, dilation=1, deformable_groups=1)

    def test_stride_dilation_and_two_deformable_groups(self):
        self.run_case(stride=2, padding=2, dilation=2, deformable_groups=2)

    def test_a_fresh_packed_layer_is_a_half_weighted_convolution(self):
        # conv_offset starts at zero: no offset and sigmoid(0) = 0.5 for every mask.
        layer = M.ModulatedDeformConv(4, 5, 3, stride=1, padding=1)
        layer.bias.data.uniform_(-1, 1)
        cpu_x, npu_x = create_common_tensor([np.float32, 0, (1, 4, 5, 5)], -1, 1)
        expected = F.conv2d(cpu_x, layer.weight.detach() * 0.5, layer.bias.detach(), padding=1)
        self.assertRtolEqual(layer.npu()(npu_x).detach().cpu(), expected)


# --- ROIAlign and PSROIPool ----------------------------------------------------------------

def bilinear_reference(plane, y, x):
    """torchvision's roi_align read of one (C, H, W) plane at one point."""
    c, h, w = plane.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return plane.new_zeros(c)
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = min(int(math.floor(y)), h - 1), min(int(math.floor(x)), w - 1)
    y_high, x_high = min(y_low + 1, h - 1), min(x_low + 1, w - 1)
    if y_low >= h - 1:
        y = float(y_low)
    if x_low >= w - 1:
        x = float(x_low)
    ly, lx = y - y_low, x - x_low
    return ((1 - ly) * (1 - lx) * plane[:, y_low, x_low] + (1 - ly) * lx * plane[:, y_low, x_high]
            + ly * (1 - lx) * plane[:, y_high, x_low] + ly * lx * plane[:, y_high, x_high])


def roi_align_reference(features, rois, out_h, out_w, scale, ratio, aligned):
    shift = 0.5 if aligned else 0.0
    results = []
    for batch_index, x1, y1, x2, y2 in rois.tolist():
        sx, sy = x1 * scale - shift, y1 * scale - shift
        rw, rh = x2 * scale - shift - sx, y2 * scale - shift - sy
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / out_h, rw / out_w
        gh = ratio if ratio > 0 else math.ceil(bh)
        gw = ratio if ratio > 0 else math.ceil(bw)
        plane = features[int(batch_index)]
        bins = []
        for ph in range(out_h):
            for pw in range(out_w):
                total = 0
                for iy in range(gh):
                    for ix in range(gw):
                        y = sy + ph * bh + (iy + 0.5) * bh / gh
                        x = sx + pw * bw + (ix + 0.5) * bw / gw
                        total = total + bilinear_reference(plane, y, x)
                bins.append(total / (gh * gw))
        results.append(torch.stack(bins, dim=1).view(-1, out_h, out_w))
    return torch.stack(results)


class TestROIAlign(TestCase):
    rois = torch.tensor([[0, 1.0, 1.5, 9.0, 7.0], [1, 0.0, 0.0, 3.0, 13.5], [0, 4.2, 2.2, 4.6, 2.4]])

    def run_case(self, aligned, sampling_ratio):
        cpu_x, _ = create_common_tensor([np.float32, 0, (2, 3, 7, 8)], -1, 1)
        x, rx = npu_leaf(cpu_x), cpu_leaf(cpu_x)
        layer = M.ROIAlign((2, 3), 0.5, sampling_ratio, aligned=aligned)
        out = layer(x, self.rois.npu())
        expected = roi_align_reference(rx, self.rois, 2, 3, 0.5, sampling_ratio, aligned)
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        grad = torch.randn_like(expected)
        out.backward(grad.npu())
        expected.backward(grad)
        self.assertRtolEqual(x.grad.cpu(), rx.grad)

    def test_aligned(self):
        self.run_case(True, 2)

    def test_legacy_alignment_through_the_fused_operator(self):
        self.run_case(False, 2)

    def test_adaptive_sampling(self):
        self.run_case(True, 0)

    def test_bad_rois_are_a_clear_error(self):
        with self.assertRaisesRegex(ValueError, r"\(R, 5\)"):
            M.ROIAlign(2, 1.0, 2)(torch.randn(1, 1, 4, 4).npu(), torch.zeros(3, 4).npu())


def ps_roi_pool_reference(x, rois, scale, group, out_dim):
    """R-FCN pooling as Ascend documents it, one bin at a time."""
    _, _, h, w = x.shape
    results = []
    for b in range(rois.shape[0]):
        for r in range(rois.shape[2]):
            index, x1, y1, x2, y2 = rois[b, :, r].tolist()
            sw, sh = round(x1) * scale, round(y1) * scale
            bw = max((round(x2) + 1) * scale - sw, 0.1) / group
            bh = max((round(y2) + 1) * scale - sh, 0.1) / group
            pooled = []
            for c in range(out_dim):
                for i in range(group):
                    for j in range(group):
                        h0 = min(max(math.floor(sh + i * bh), 0), h)
                        h1 = min(max(math.ceil(sh + (i + 1) * bh), 0), h)
                        w0 = min(max(math.floor(sw + j * bw), 0), w)
                        w1 = min(max(math.ceil(sw + (j + 1) * bw), 0), w)
                        area = (h1 - h0) * (w1 - w0)
                        channel = x[int(index), (c * group + i) * group + j]
                        pooled.append(channel[h0:h1, w0:w1].sum() / area if area > 0 else channel.sum() * 0)
            results.append(torch.stack(pooled).view(out_dim, group, group))
    return torch.stack(results)


class TestPSROIPool(TestCase):
    def test_forward_and_backward_against_the_bin_by_bin_reference(self):
        group, out_dim, scale = 2, 3, 0.5
        cpu_x, _ = create_common_tensor([np.float32, 0, (2, out_dim * group * group, 6, 7)], -1, 1)
        rois = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [2.0, 3.0], [9.0, 12.0], [8.0, 10.0]]])  # (1, 5, 2)
        x, rx = npu_leaf(cpu_x), cpu_leaf(cpu_x)
        out = M.PSROIPool(group, group, scale, group, out_dim)(x, rois.npu())
        expected = ps_roi_pool_reference(rx, rois, scale, group, out_dim)
        self.assertEqual(tuple(out.shape), (2, out_dim, group, group))
        self.assertRtolEqual(out.detach().cpu(), expected.detach())
        grad = torch.randn_like(expected)
        out.backward(grad.npu())
        expected.backward(grad)
        self.assertRtolEqual(x.grad.cpu(), rx.grad)

    def test_pooled_size_must_match_the_groups(self):
        with self.assertRaisesRegex(ValueError, "must equal group_size"):
            M.PSROIPool(7, 7, 0.0625, 3, 22)


# --- Prefetcher ----------------------------------------------------------------------------

class TestPrefetcher(TestCase):
    def test_yields_the_loaders_batches_on_npu_then_none(self):
        dataset = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
        loader = torch.utils.data.DataLoader(dataset, batch_size=4)
        stream = torch.npu.Stream()
        prefetcher = M.Prefetcher(loader, stream=stream)
        self.assertIs(prefetcher.stream, stream)
        got = []
        batch = prefetcher.next()
        while batch[0] is not None:
            self.assertEqual((batch[0].device.type, batch[1].device.type), ("npu", "npu"))
            got.append(tuple(t.cpu() for t in batch))
            batch = prefetcher.next()
        self.assertEqual(batch, (None, None))
        expected = list(loader)
        self.assertEqual(len(got), len(expected))
        for (gi, gt), (ei, et) in zip(got, expected):
            self.assertRtolEqual(gi, ei)
            self.assertTrue(torch.equal(gt, et))

    def test_a_loader_of_other_items_is_a_clear_error(self):
        with self.assertRaisesRegex(TypeError, r"\(input, target\) pairs"):
            M.Prefetcher([torch.randn(2)])


# --- quantised layers ----------------------------------------------------------------------

class TestQuantisedLinear(TestCase):
    def int8(self, shape):
        return torch.randint(-8, 8, shape, dtype=torch.int8)

    def test_linear_quant_dequantises_to_float16(self):
        x, w = self.int8((3, 16)), self.int8((5, 16))
        bias = torch.randint(-20, 20, (5,), dtype=torch.int32)
        scale = torch.rand(5) * 0.1
        layer = M.LinearQuant(16, 5, output_dtype=torch.float16).npu()
        layer.weight.data, layer.bias.data, layer.scale.data = w.npu(), bias.npu(), scale.npu()
        expected = ((x.double() @ w.double().T + bias.double()) * scale.double()).to(torch.float16)
        self.assertRtolEqual(layer(x.npu()).cpu(), expected)

    def test_linear_a8w8_quant_requantises_with_offset(self):
        x, w = self.int8((4, 8)), self.int8((6, 8))
        scale, offset = torch.rand(6) * 0.05, torch.randn(6) * 3
        layer = M.LinearA8W8Quant(8, 6, bias=False, offset=True).npu()
        layer.weight.data, layer.scale.data, layer.offset.data = w.npu(), scale.npu(), offset.npu()
        expected = torch.round((x.double() @ w.double().T) * scale.double() + offset.double()).clamp(-128, 127)
        out = layer(x.npu())
        self.assertEqual(out.dtype, torch.int8)
        self.assertRtolEqual(out.cpu().double(), expected)
        with self.assertRaisesRegex(TypeError, "supported: int8"):
            layer(torch.zeros(4, 8, dtype=torch.int32).npu())
        with self.assertRaisesRegex(TypeError, "must both be int8"):
            M.LinearQuant(8, 6).npu()(torch.zeros(4, 1, dtype=torch.int32).npu())

    def test_linear_weight_quant_per_channel_and_per_group(self):
        x = torch.randn(3, 64, dtype=torch.float16)
        w = self.int8((4, 64))
        scale, offset = (torch.rand(4, 2) * 0.1).half(), torch.randn(4, 2).half()
        bias = torch.randn(4).half()
        layer = M.LinearWeightQuant(64, 4, dtype=torch.float16, antiquant_offset=True, antiquant_group_size=32).npu()
        layer.weight.data, layer.bias.data = w.npu(), bias.npu()
        layer.antiquant_scale.data, layer.antiquant_offset.data = scale.npu(), offset.npu()
        group_of_k = torch.arange(64) // 32
        dequant = (w.float() + offset.float()[:, group_of_k]) * scale.float()[:, group_of_k]
        expected = (x.float() @ dequant.T + bias.float()).half()
        self.assertRtolEqual(layer(x.npu()).cpu(), expected)
        per_channel = M.LinearWeightQuant(64, 4, bias=False, quant_scale=True).npu()
        per_channel.weight.data = w.npu()
        per_channel.antiquant_scale.data = scale[:, 0].contiguous().npu()
        per_channel.quant_scale.data = torch.full((4,), 0.5).npu()
        requant = torch.round((x.float() @ (w.float() * scale.float()[:, :1]).T) * 0.5).clamp(-128, 127)
        out = per_channel(x.npu())
        self.assertEqual(out.dtype, torch.int8)
        self.assertRtolEqual(out.cpu().float(), requant)


class TestQuantConv2d(TestCase):
    def test_dequantised_convolution_with_a_padding_value(self):
        x = torch.randint(-10, 10, (1, 2, 5, 5), dtype=torch.int8)
        w = torch.randint(-5, 5, (3, 2, 3, 3), dtype=torch.int8)
        bias = torch.randint(-50, 50, (3,), dtype=torch.int32)
        scale = torch.rand(3) * 0.01
        layer = M.QuantConv2d(2, 3, 3, torch.float16, stride=2, padding=1, offset_x=4).npu()
        layer.weight.data, layer.bias.data, layer.scale.data = w.npu(), bias.npu(), scale.npu()
        # Padding with 4 equals padding (x - 4) with zeros, then adding 4 * sum(weight) back.
        acc = F.conv2d(x.double() - 4, w.double(), stride=2, padding=1) + 4 * w.double().sum(dim=(1, 2, 3)).view(1, 3, 1, 1)
        expected = ((acc + bias.double().view(1, 3, 1, 1)).float() * scale.view(1, 3, 1, 1)).half()
        out = layer(x.npu())
        self.assertEqual(out.dtype, torch.float16)
        self.assertRtolEqual(out.cpu(), expected)
        with self.assertRaisesRegex(TypeError, "int8 NCHW"):
            layer(x.float().npu())


# --- torch.compile -------------------------------------------------------------------------

class TestCompiled(TestCase):
    def test_channel_shuffle_and_silu_train_under_compile(self):
        layer, act = M.ChannelShuffle(8, split_shuffle=False), M.SiLU()

        def step(a, b):
            return act(layer(a, b)).sum()

        compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
        cpu1, cpu2 = torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3)
        a, b, ea, eb = npu_leaf(cpu1), npu_leaf(cpu2), npu_leaf(cpu1), npu_leaf(cpu2)
        loss, expected = compiled(a, b), step(ea, eb)
        self.assertRtolEqual(loss.detach().cpu(), expected.detach().cpu())
        loss.backward()
        expected.backward()
        self.assertRtolEqual(a.grad.cpu(), ea.grad.cpu())
        self.assertRtolEqual(b.grad.cpu(), eb.grad.cpu())


if __name__ == "__main__":
    run_tests()
