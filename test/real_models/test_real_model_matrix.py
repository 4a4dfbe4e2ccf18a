"""Real models of torchvision and transformers on every npu path, against cpu eager.

One test per (model, path) cell of ``model_paths``; the suite runs ``CI_CELLS``, and
``TORCH_NPU_REAL_MODEL_MATRIX=full`` (``scripts/real_model_matrix.sh``) every cell.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torchvision")

import torch_npu  # noqa: E402,F401  (registers the npu device)
from model_paths import PATHS, TORCH_LIMITS, selected_cells  # noqa: E402
from real_models import MODELS  # noqa: E402

NEEDS_MLIR = {"inductor_mlir_inference", "inductor_mlir_training"}
NEEDS_ONNX = {"onnx"}


def _cell(model_name: str, path: str):
    reason = TORCH_LIMITS.get((model_name, path))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(model_name, path, marks=marks, id=f"{model_name}-{path}")


@pytest.mark.parametrize("model_name, path", [_cell(m, p) for m, p in selected_cells()])
def test_real_model_on_npu_matches_cpu(model_name, path):
    if path in NEEDS_MLIR:
        pytest.importorskip("torch_mlir")
    if path in NEEDS_ONNX:
        pytest.importorskip("onnxscript")
    model = MODELS[model_name]
    if model.family != "cnn":
        pytest.importorskip("transformers")
    PATHS[path](model)
