#!/usr/bin/env bash
# Runs every cell of the real-model matrix (test/real_models/model_paths.py CELLS: each
# torchvision and transformers model on every npu path against cpu eager); the test
# suite runs only the fixed subset CI_CELLS. Extra arguments go to pytest (e.g. -k gpt2).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_NPU_REAL_MODEL_MATRIX=full exec .venv/bin/python -m pytest -q test/real_models "$@"
