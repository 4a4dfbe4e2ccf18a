#!/usr/bin/env bash
# Creates .venv with the CPU build of torch==2.13.0 and installs torch_npu into it
# (editable, so its entry points exist). The extension is built without build isolation
# against that torch; pip never resolves torch on its own. `--test` adds the test extras
# (pytest, parameterized, onnx, onnxscript, and the real client libraries torchvision,
# transformers and accelerate), the optional MLIR backend (torch-mlir), and the Ascend client
# libraries test/clients runs unchanged (DeepSpeed, diffusers, peft, torchtitan).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
if [ "${1:-}" = "--test" ]; then extras="[test,mlir]"; fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade "pip>=24"
.venv/bin/pip install -q torch==2.13.0 numpy ninja "setuptools>=64" wheel
MAX_JOBS="${MAX_JOBS:-$(nproc)}" .venv/bin/pip install -q --no-build-isolation -e ".${extras}"
if [ -n "$extras" ]; then
  # Client libraries, pinned, each with --no-deps and its dependencies named: a client that
  # lists torch_npu (or torch) among its requirements would otherwise have pip replace this
  # package or the CPU torch.
  .venv/bin/pip install -q --no-deps diffusers==0.42.1 peft==0.21.2 torchtitan==0.3.0 \
    spmd-types==0.2.3 torch-checkpointing==0.1.1 torchdata==0.11.0 tyro==1.0.16 \
    docstring-parser==0.18.0 typeguard==4.6.1 hjson==3.1.0 msgpack==1.2.4 py-cpuinfo==9.0.0 einops==0.8.2
  .venv/bin/pip install -q requests==2.34.2 importlib_metadata==10.2.0
  # DeepSpeed's setup.py builds its npu op builders when torch_npu is importable, and they
  # read ASCEND_HOME_PATH: the toolkit environment is set for this one command.
  (eval "$(.venv/bin/python -m torch_npu.toolkit env build/ascend)" &&
    .venv/bin/pip install -q --no-deps --no-build-isolation deepspeed==0.19.8)
  # torchtitan imports triton (triton-ascend provides it on Ascend machines), tensorboard
  # and datasets at start-up. They go to a directory of their own that only the torchtitan
  # tests put on the path, so that no other test's Inductor finds a triton.
  .venv/bin/pip install -q --no-deps --upgrade --target .venv/torchtitan-deps triton-ascend==3.2.0 pybind11==3.1.0 \
    tensorboard==2.21.0 absl-py==2.5.1 datasets==4.7.0 pyarrow==26.0.1 dill==0.4.1 multiprocess==0.70.19 \
    xxhash==4.1.0 pandas==3.1.1 python-dateutil==4.0.0 pytz==2026.6 tzdata==2026.6 six==1.17.0 \
    httpx==0.29.0 httpcore==1.0.9 certifi==2026.10.19.post1
fi
.venv/bin/python -c "import torch, torch_npu; assert torch.__version__.startswith('2.13.0'), torch.__version__"
# No client replaced this package: torch_npu is still this checkout, installed editable.
.venv/bin/python - <<'PY'
import importlib.metadata as md, json, os
url = json.loads(md.distribution("torch_npu").read_text("direct_url.json"))
assert url.get("dir_info", {}).get("editable") and os.path.samefile(url["url"][len("file://"):], "."), url
PY
