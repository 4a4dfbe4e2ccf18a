"""Bad arguments to the fused npu_* operators fail at once with an error that names the
argument and says what is accepted, in eager mode and while torch.compile traces."""
from __future__ import annotations

import pytest
import torch

import torch_npu

D = "npu"


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).to(D)


CASES = {
    "rms_norm dtype": (lambda: torch_npu.npu_rms_norm(t(2, 4, dtype=torch.float64), t(4)), TypeError, "self has dtype float64"),
    "rms_norm gamma dtype": (lambda: torch_npu.npu_rms_norm(t(2, 4), t(4, dtype=torch.float16)), TypeError, "gamma has dtype float16"),
    "rms_norm gamma shape": (lambda: torch_npu.npu_rms_norm(t(2, 4), t(3)), ValueError, "gamma of shape (3,) must equal the trailing dimensions"),
    "add_rms_norm shapes": (lambda: torch_npu.npu_add_rms_norm(t(2, 4), t(3, 4), t(4)), ValueError, "x2 of shape (3, 4)"),
    "rotary_mul mode": (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3, 4), t(1, 2, 1, 4), t(1, 2, 1, 4), "quarter"), ValueError, "rotary_mode='quarter' is not supported"),
    "rotary_mul rank": (lambda: torch_npu.npu_rotary_mul(t(2, 4), t(2, 4), t(2, 4)), ValueError, "self must have 3, 4 dimensions"),
    "rotary_mul odd D": (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3, 5), t(1, 2, 1, 5), t(1, 2, 1, 5)), ValueError, "(D=5) must be even"),
    "rotary_mul broadcast": (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3, 4), t(1, 5, 1, 4), t(1, 2, 1, 4)), ValueError, "r1 of shape (1, 5, 1, 4) does not broadcast"),
    "rotary_mul r2 dtype": (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3, 4), t(1, 2, 1, 4), t(1, 2, 1, 4, dtype=torch.float16)), TypeError, "r2 has dtype float16"),
    "rotary_mul rotate shape": (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3, 4), t(1, 2, 1, 4), t(1, 2, 1, 4), "half", t(3, 3)), ValueError, "rotate must be a (4, 4) matrix"),
    "apply_rotary layout": (lambda: torch_npu.npu_apply_rotary_pos_emb(t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 1, 4), t(1, 2, 1, 4), layout="BHSD"), ValueError, "layout='BHSD' is not supported"),
    "apply_rotary TND rank": (lambda: torch_npu.npu_apply_rotary_pos_emb(t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 1, 4), t(1, 2, 1, 4), layout="TND"), ValueError, "query must have 3 dimensions for layout 'TND'"),
    "apply_rotary cos heads": (lambda: torch_npu.npu_apply_rotary_pos_emb(t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 3, 4)), ValueError, "cos must have size 1 in the N dimension"),
    "swiglu odd split": (lambda: torch_npu.npu_swiglu(t(2, 5)), ValueError, "dimension dim=1 (5) must be even"),
    "swiglu dim range": (lambda: torch_npu.npu_swiglu(t(2, 4), dim=2), IndexError, "dim=2 is out of range"),
    "gelu approximate": (lambda: torch_npu.npu_gelu(t(3), approximate="erf"), ValueError, "approximate='erf' is not supported"),
    "silu dtype": (lambda: torch_npu.npu_silu(t(3).int()), TypeError, "self has dtype int32"),
    "softmax mask dtype": (lambda: torch_npu.npu_scaled_masked_softmax(t(2, 4, 4), t(2, 4, 4)), TypeError, "mask has dtype float32"),
    "softmax mask shape": (lambda: torch_npu.npu_scaled_masked_softmax(t(2, 4, 4), t(3, 4, 4) > 0), ValueError, "mask of shape (3, 4, 4) does not broadcast to x"),
    "confusion perm": (lambda: torch_npu.npu_confusion_transpose(t(2, 3, 4), [0, 2, 2], [2, 12], True), ValueError, "perm=[0, 2, 2] must be a permutation"),
    "confusion shape": (lambda: torch_npu.npu_confusion_transpose(t(2, 3, 4), [0, 2, 1], [5, 5], True), ValueError, "shape=[5, 5] does not hold the 24 elements"),
    "dtype_cast dtype": (lambda: torch_npu.npu_dtype_cast(t(3), "float16"), TypeError, "dtype must be a torch.dtype"),
    "gating k": (lambda: torch_npu.npu_moe_gating_top_k_softmax(t(4, 3), None, 5), ValueError, "k=5 must be an int with 0 < k"),
    "gating finished shape": (lambda: torch_npu.npu_moe_gating_top_k_softmax(t(4, 3), t(3) > 0, 1), ValueError, "finished must have shape x.shape[:-1] = (4,)"),
    "routing dtype": (lambda: torch_npu.npu_moe_init_routing(t(4, 3), t(4, 2).long(), t(4, 2).int(), 4), TypeError, "row_idx has dtype int64"),
    "gmm group sum": (lambda: torch_npu.npu_grouped_matmul([t(6, 4)], [t(2, 4, 3)], group_list=[2, 5], split_item=3, group_type=0), ValueError, "add up to 5, but the split dimension has 6"),
    "gmm split_item": (lambda: torch_npu.npu_grouped_matmul([t(6, 4)], [t(4, 3)], split_item=7), ValueError, "split_item=7 is not supported"),
    "gmm reserved": (lambda: torch_npu.npu_grouped_matmul([t(6, 4)], [t(4, 3)], offset=[t(3)]), ValueError, "offset is reserved"),
    "dynamic_quant dtype": (lambda: torch_npu.npu_dynamic_quant(t(2, 8)), TypeError, "input has dtype float32; supported: float16, bfloat16"),
    "dynamic_quant int4 width": (lambda: torch_npu.npu_dynamic_quant(t(2, 12, dtype=torch.float16), dst_type=torch.quint4x2), ValueError, "(12) must be a multiple of 8"),
    "dynamic_quant smooth shape": (lambda: torch_npu.npu_dynamic_quant(t(2, 8, dtype=torch.float16), smooth_scales=t(4, dtype=torch.float16)), ValueError, "smooth_scales must be 1-dimensional with the 8 elements"),
    "quant_matmul dtype": (lambda: torch_npu.npu_quant_matmul(t(2, 4), t(4, 3), t(3)), TypeError, "x1 has dtype float32"),
    "quant_matmul scale shape": (lambda: torch_npu.npu_quant_matmul(t(2, 4).to(torch.int8), t(4, 3).to(torch.int8), t(2)), ValueError, "scale must be 1-dimensional with 1 or n=3 elements"),
    "quant_matmul packed scale": (lambda: torch_npu.npu_quant_matmul(t(2, 4).to(torch.int8), t(4, 3).to(torch.int8), t(3).long()), TypeError, "npu_trans_quant_param"),
    "quant_matmul group_sizes": (lambda: torch_npu.npu_quant_matmul(t(2, 4).to(torch.int8), t(4, 3).to(torch.int8), t(3), group_sizes=[1, 1, 2]), ValueError, "group_sizes=[1, 1, 2]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_argument_error_names_the_argument(case):
    call, error, message = CASES[case]
    with pytest.raises(error) as excinfo:
        call()
    assert message in str(excinfo.value)
    assert str(excinfo.value).startswith("npu_")  # names the operator too


def test_backward_with_rotate_matrix_is_refused_clearly():
    x = t(1, 2, 3, 4).requires_grad_(True)
    out = torch_npu.npu_rotary_mul(x, t(1, 2, 1, 4), t(1, 2, 1, 4), "half", t(4, 4))
    with pytest.raises(RuntimeError, match="no backward when a rotate matrix is given"):
        out.sum().backward()


def test_bad_argument_fails_while_compiling_with_the_same_message():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: torch_npu.npu_rms_norm(x, w), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="gamma of shape \\(3,\\) must equal the trailing dimensions"):
        compiled(t(2, 4), t(3))
