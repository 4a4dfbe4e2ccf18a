#!/usr/bin/env bash
# Creates .venv with the CPU build of torch==2.13.0 and installs torch_npu into it
# (editable, so its entry points exist). The extension is built without build isolation
# against that torch; pip never resolves torch on its own. `--test` adds the test extras
# (pytest, parameterized, onnx, onnxscript, and the real client libraries torchvision,
# transformers and accelerate) and the optional MLIR backend (torch-mlir).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
if [ "${1:-}" = "--test" ]; then extras="[test,mlir]"; fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade "pip>=24"
.venv/bin/pip install -q torch==2.13.0 numpy ninja "setuptools>=64" wheel
MAX_JOBS="${MAX_JOBS:-$(nproc)}" .venv/bin/pip install -q --no-build-isolation -e ".${extras}"
.venv/bin/python -c "import torch, torch_npu; assert torch.__version__.startswith('2.13.0'), torch.__version__"
