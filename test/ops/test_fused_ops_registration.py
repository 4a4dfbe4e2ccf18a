"""How the fused operators are registered: every family's names are torch_npu attributes
bound to torch.ops.npu, and their Inductor decompositions reach Inductor only when an
Inductor compile is about to start (never at import torch_npu), also when Inductor was
used before torch_npu was imported."""
from __future__ import annotations

import json

import torch

import torch_npu
from torch_npu import ops

ASCEND_NAMES = (
    "npu_rms_norm", "npu_add_rms_norm", "npu_rotary_mul", "npu_apply_rotary_pos_emb",
    "npu_swiglu", "npu_gelu", "npu_silu", "npu_scaled_masked_softmax",
    "npu_confusion_transpose", "npu_dtype_cast", "npu_grouped_matmul",
    "npu_moe_gating_top_k_softmax", "npu_moe_init_routing", "npu_dynamic_quant",
    "npu_quant_matmul",
)


def test_every_operator_is_a_torch_npu_attribute_and_a_torch_ops_npu_operator():
    for name in ASCEND_NAMES:
        assert callable(getattr(torch_npu, name)), name
        assert hasattr(torch.ops.npu, name), name
    # Plain operators are the OpOverloadPackets themselves.
    assert torch_npu.npu_rms_norm is torch.ops.npu.npu_rms_norm
    assert torch_npu.npu_swiglu is torch.ops.npu.npu_swiglu


def test_decompositions_registered_by_the_trigger_only(python):
    out = python(
        """
        import json, sys
        import torch, torch_npu
        before = "torch._inductor.decomposition" in sys.modules
        import torch._inductor.compile_fx
        from torch._inductor.decomposition import decompositions, select_decomp_table
        table = select_decomp_table()
        print(json.dumps({
            "loaded_at_import": before,
            "in_table": torch.ops.npu.npu_rms_norm.default in decompositions,
            "in_selected": torch.ops.npu.npu_swiglu_backward.default in table,
            "routing_opaque": torch.ops.npu.npu_moe_init_routing.default not in table,
        }))
        """
    )
    assert json.loads(out.strip().splitlines()[-1]) == {
        "loaded_at_import": False, "in_table": True, "in_selected": True, "routing_opaque": True,
    }


def test_inductor_used_before_import_torch_npu_still_fuses_the_npu_ops(python):
    out = python(
        """
        import json
        import torch
        torch.compile(lambda x: x.sin() + 1, backend="inductor")(torch.randn(4))  # caches the table
        import torch_npu
        from torch._inductor.utils import run_and_get_code
        x, w = torch.randn(8, 16, device="npu"), torch.randn(16, device="npu")
        f = torch.compile(lambda x, w: torch_npu.npu_rms_norm(x, w)[0], backend="inductor", fullgraph=True)
        _, code = run_and_get_code(f, x, w)
        print(json.dumps({"opaque": "torch.ops.npu.npu_rms_norm" in code[0]}))
        """
    )
    assert json.loads(out.strip().splitlines()[-1]) == {"opaque": False}


def test_register_inductor_decompositions_is_idempotent():
    import torch._inductor.compile_fx  # noqa: F401  (runs the trigger's step)

    assert ops.register_inductor_decompositions() == []
