"""Every listing name of torch_npu.optim, torch_npu.utils, torch_npu.jit and torch_npu.distributed
exists with the listing's parameter names, order, kinds and defaults (annotations may differ).
torch_npu.multiprocessing belongs to another area and is not walked here."""
from __future__ import annotations

import importlib
import inspect
import os
import pickle
import re

import pytest
import torch
from torch.optim.optimizer import required

import torch_npu  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# shared/ sits beside the checkout (CI, the main checkout) or beside the worktrees' folder.
LISTING_CANDIDATES = [os.environ.get("TORCH_NPU_PUBLIC_API_LISTING", "")] + [
    os.path.join(REPO, *[".."] * up, "shared", "reference", "torch_npu_public_api.tsv") for up in (1, 2)]
AREA = re.compile(r"torch_npu\.(optim|utils|jit|distributed)\b")
# Placeholders for the listing's unparsable default reprs.
DEFAULT_SPELLINGS = {"<module 'pickle'>": "__PICKLE__", "<required parameter>": "__REQUIRED__",
                     "<RedOpType.SUM: 0>": "__SUM__"}


def _listing_rows():
    path = next((os.path.normpath(p) for p in LISTING_CANDIDATES if p and os.path.isfile(p)), None)
    if path is None:
        return []
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.startswith("python\t")]
    return [(name, sig) for _, name, sig in rows if AREA.match(name)]


def _resolve(name):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def _normalise(value):
    if value is pickle:
        return "__PICKLE__"
    if value is required:
        return "__REQUIRED__"
    if value is torch.distributed.ReduceOp.SUM or repr(value).endswith("SUM: 0>"):
        return "__SUM__"
    return value


def _expected_parameters(sig_text):
    text = re.sub(r"\)\s*->.*$", ")", sig_text)
    for spelled, placeholder in DEFAULT_SPELLINGS.items():
        text = text.replace(spelled, repr(placeholder))
    namespace = {}
    exec(f"from __future__ import annotations\ndef f{text}: pass", {}, namespace)
    return [(p.name, p.kind, p.default) for p in inspect.signature(namespace["f"]).parameters.values()]


ROWS = _listing_rows()


def test_the_listing_has_this_areas_rows():
    if not ROWS:
        pytest.skip("the public-API listing (shared/reference) is not beside this checkout")
    assert len(ROWS) >= 87


@pytest.mark.parametrize("name, sig", ROWS, ids=[r[0] for r in ROWS])
def test_name_exists_with_the_listed_signature(name, sig):
    obj = _resolve(name)
    have = [(p.name, p.kind, _normalise(p.default)) for p in inspect.signature(obj).parameters.values()]
    assert have == _expected_parameters(sig)
