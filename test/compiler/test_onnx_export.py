"""``torch.onnx.export(..., dynamo=True)`` of an npu model, with torch.onnx imported before
or after torch_npu (and ``export`` bound before ``import torch_npu``). The ONNX model is
run with onnx's reference evaluator and compared with CPU eager."""
from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")

ONNX_SESSION = """
import sys
import numpy as np
from onnx.reference import ReferenceEvaluator

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)
    def forward(self, x):
        return torch.relu(self.linear(x)) * 2

torch.manual_seed(0)
model, x = M(), torch.randn(3, 8)
expected = model(x).detach().numpy()
program = export(model.npu(), (x.npu(),), dynamo=True, verbose=False)
evaluator = ReferenceEvaluator(program.model_proto)
actual = evaluator.run(None, {evaluator.input_names[0]: x.numpy()})[0]
ours = [m for m in sys.modules if m.startswith("torch_npu.compiler.inductor")]
print("onnx", np.allclose(actual, expected, atol=1e-5), torch_npu._startup.compile_trigger.state().failed, ours)
"""


@pytest.mark.parametrize("order", ["onnx_first", "torch_npu_first"])
def test_onnx_dynamo_export_of_npu_model(python, order):
    if order == "onnx_first":
        head = "import torch\nfrom torch.onnx import export\nimport torch_npu\n"
    else:
        head = "import torch, torch_npu\nfrom torch.onnx import export\n"
    out = python(head + ONNX_SESSION, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.strip().splitlines()[-1] == "onnx True () []"
