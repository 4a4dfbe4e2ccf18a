"""``python -m torch_npu.ops``: rewrite ``torch_npu/ops/_catalog.py`` and the C++ include of its
schemas (``torch_npu/csrc/aten/npu_op_schemas.inc``, rebuild the extension after) from the op
families."""
from __future__ import annotations

import os

import torch_npu  # noqa: F401  (the families import the runtime)
from torch_npu import ops
from torch_npu.ops import _schema_include

path = os.path.join(os.path.dirname(ops.__file__), "_catalog.py")
schemas, _ = ops.build_catalog()
with open(path, "w") as f:
    f.write(ops.render_catalog())
with open(_schema_include.PATH, "w") as f:
    f.write(_schema_include.render(schemas))
print(path)
print(_schema_include.PATH)
