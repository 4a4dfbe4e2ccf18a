"""``python -m torch_npu.ops``: rewrite ``torch_npu/ops/_catalog.py`` from the op families."""
from __future__ import annotations

import os

import torch_npu  # noqa: F401  (the families import the runtime)
from torch_npu import ops

path = os.path.join(os.path.dirname(ops.__file__), "_catalog.py")
with open(path, "w") as f:
    f.write(ops.render_catalog())
print(path)
