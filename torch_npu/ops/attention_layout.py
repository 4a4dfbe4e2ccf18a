"""Argument checks and layout conversion shared by the Ascend attention operators.

The Ascend attention ops take query/key/value in one of several layouts (BSH, SBH, BSND, BNSD,
TND, ...) with the head count passed separately, masks in several shapes and sparse modes that
encode causal and band masks without materialising them. The fused kernels take one canonical
form: 4-D ``[B, N, S, D]`` views, a mask and bias broadcastable to ``[B, N, Sq, Skv]``, a band
rule ``lo <= j - i - shift <= hi`` and optional per-batch or packed sequence lengths. This module
turns the Ascend arguments into that form (views only: no copy of q/k/v) and back, and raises
the errors the Ascend documentation states for bad arguments, naming the argument and the fix.
It is used by the kernels and by the fake kernels alike, so eager and traced calls check the
same things.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import torch

# A band bound meaning "unbounded" (torch_npu/csrc/aten/fused_attention.h, kUnboundedBand).
UNBOUNDED = 1 << 62
# Ascend's default pre/next token count: no band restriction.
ASCEND_TOKENS_MAX = 2147483647
# Side of the compressed causal/band mask the sparse modes 2, 3 and 4 take.
COMPRESSED_MASK_SIDE = 2048

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MASK_DTYPES = (torch.bool, torch.uint8)
INFER_MASK_DTYPES = (torch.bool, torch.uint8, torch.int8)


def fail(op: str, message: str) -> None:
    raise RuntimeError(f"{op}: {message}")


@dataclasses.dataclass
class Band:
    """Allowed key positions j of query row i: lo <= j - i - shift <= hi, where shift is
    Skv - Sq of the sequence when ``bottom_right`` (0 otherwise)."""

    lo: int = -UNBOUNDED
    hi: int = UNBOUNDED
    bottom_right: bool = False


@dataclasses.dataclass
class Problem:
    """An attention call in canonical form: 4-D [B, N, S, D] views plus the geometry needed
    to put results back into the caller's layout."""

    op: str
    layout: str            # the query layout ("BSH", ..., "TND")
    out_layout: str        # the layout of the output (differs for e.g. "BNSD_BSND")
    q: torch.Tensor        # [B, N1, Sq, D]
    k: torch.Tensor        # [B, N2, Skv, D]
    v: torch.Tensor        # [B, N2, Skv, Dv]
    heads: int
    kv_heads: int
    # Per-batch valid lengths, or (packed layouts) per-sequence lengths; None = all of S.
    q_lens: Optional[list[int]] = None
    kv_lens: Optional[list[int]] = None
    packed: bool = False

    @property
    def batch(self) -> int:
        return self.q.shape[0]

    @property
    def q_len(self) -> int:
        return self.q.shape[2]

    @property
    def kv_len(self) -> int:
        return self.k.shape[2]

    @property
    def value_dim(self) -> int:
        return self.v.shape[3]

    def out_perm(self) -> list[int]:
        return layout_perm(self.out_layout)

    def stats_perm(self) -> list[int]:
        return [0, 2, 1, 3] if self.packed else [0, 1, 2, 3]

    def cumulative(self, lens: Optional[list[int]]) -> Optional[list[int]]:
        if lens is None:
            return None
        out = [0]
        for n in lens:
            out.append(out[-1] + n)
        return out

    def segment_pairs(self) -> list[tuple[int, int]]:
        """(q_len, kv_len) of every sequence, for the dropout element count."""
        if self.q_lens is None:
            return [(self.q_len, self.kv_len)] * self.batch
        return list(zip(self.q_lens, self.kv_lens))

    def dropout_numel(self) -> int:
        return self.heads * sum(a * b for a, b in self.segment_pairs())

    def to_layout(self, t: torch.Tensor, layout: Optional[str] = None) -> torch.Tensor:
        """A canonical [B, N, S, X] tensor (allocated in `layout`'s order) in that layout."""
        return from_canonical(t, layout or self.out_layout)

    def from_layout(self, t: torch.Tensor, layout: Optional[str] = None) -> torch.Tensor:
        """A tensor in the query layout (e.g. the output gradient) as a canonical view."""
        return to_canonical(t, layout or self.out_layout, self.heads)


def layout_perm(layout: str) -> list[int]:
    """Physical order (outermost first) of the canonical dims B, N, S, D in `layout`."""
    if layout in ("BSH", "BSND", "TND"):
        return [0, 2, 1, 3]
    if layout == "SBH":
        return [2, 0, 1, 3]
    if layout == "BNSD":
        return [0, 1, 2, 3]
    if layout in ("NBSD",):
        return [1, 0, 2, 3]
    if layout == "NTD":
        return [1, 0, 2, 3]
    raise AssertionError(layout)


def to_canonical(t: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    if layout == "BSH":
        return t.unflatten(2, (heads, -1)).transpose(1, 2)
    if layout == "SBH":
        return t.unflatten(2, (heads, -1)).permute(1, 2, 0, 3)
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BNSD":
        return t
    if layout == "NBSD":
        return t.transpose(0, 1)
    if layout == "TND":
        return t.transpose(0, 1).unsqueeze(0)
    if layout == "NTD":
        return t.unsqueeze(0)
    raise AssertionError(layout)


def from_canonical(t: torch.Tensor, layout: str) -> torch.Tensor:
    b, n, s, d = t.shape
    if layout == "BSH":
        return t.transpose(1, 2).reshape(b, s, n * d)
    if layout == "SBH":
        return t.permute(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BNSD":
        return t
    if layout == "NBSD":
        return t.transpose(0, 1)
    if layout == "TND":
        return t[0].transpose(0, 1)
    if layout == "NTD":
        return t[0]
    raise AssertionError(layout)


def check_tensors(op: str, query, key, value, dtypes=FLOAT_DTYPES) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            fail(op, f"{name} must be a Tensor, got {type(t).__name__}")
    if query.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        fail(op, f"query has dtype {query.dtype}, which is not supported; use one of {names}")
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            fail(op, f"{name} has dtype {t.dtype} but query has {query.dtype}; query, key and value "
                     f"must have one dtype")
        if t.device != query.device:
            fail(op, f"{name} is on {t.device} but query is on {query.device}; move them to one device")


def _heads_from_hidden(op: str, name: str, hidden: int, head_dim: int) -> int:
    if head_dim <= 0 or hidden % head_dim != 0:
        fail(op, f"the hidden size of {name} ({hidden}) is not a multiple of the head dim {head_dim} "
                 f"(query hidden size / head_num)")
    return hidden // head_dim


def canonical_qkv(op: str, query, key, value, heads: int, layout: str, kv_heads: int = 0,
                  head_arg: str = "head_num", kv_head_arg: str = "num_key_value_heads"):
    """Views of q/k/v as [B, N, S, D]; checks dims, head counts and shapes for `layout`."""
    if not isinstance(heads, int) or heads <= 0:
        fail(op, f"{head_arg} must be a positive int, got {heads!r}")
    want_dim = 3 if layout in ("BSH", "SBH", "TND", "NTD") else 4
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != want_dim:
            fail(op, f"input_layout {layout!r} expects {want_dim}-D {name}, got shape {tuple(t.shape)}")
    if layout in ("BSH", "SBH"):
        hidden = query.shape[2]
        if hidden % heads != 0:
            fail(op, f"{head_arg} ({heads}) must divide the hidden size H={hidden} of query "
                     f"(shape {tuple(query.shape)}, layout {layout})")
        d = hidden // heads
        n2 = _heads_from_hidden(op, "key", key.shape[2], d)
        if value.shape[2] % n2 != 0:
            fail(op, f"the hidden size of value ({value.shape[2]}) is not a multiple of the key/value "
                     f"head count {n2}")
        q4 = to_canonical(query, layout, heads)
        k4 = to_canonical(key, layout, n2)
        v4 = to_canonical(value, layout, n2)
    else:
        q4 = to_canonical(query, layout, heads)
        k4 = to_canonical(key, layout, 0)
        v4 = to_canonical(value, layout, 0)
        if q4.shape[1] != heads:
            fail(op, f"{head_arg} ({heads}) must equal the N dimension of query in layout {layout} "
                     f"(shape {tuple(query.shape)} has N={q4.shape[1]})")
    n2 = k4.shape[1]
    if kv_heads and kv_heads != n2:
        fail(op, f"{kv_head_arg} ({kv_heads}) must equal the N dimension of key/value ({n2})")
    if n2 == 0 or heads % n2 != 0:
        fail(op, f"the query head count ({heads}) must be a multiple of the key/value head count ({n2})")
    if v4.shape[1] != n2 or tuple(v4.shape[:3]) != tuple(k4.shape[:3]):
        fail(op, f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same batch, "
                 f"sequence and head sizes")
    if layout not in ("TND", "NTD") and k4.shape[0] != q4.shape[0]:
        fail(op, f"query batch {q4.shape[0]} and key/value batch {k4.shape[0]} must be equal")
    if k4.shape[3] != q4.shape[3]:
        fail(op, f"query head dim {q4.shape[3]} and key head dim {k4.shape[3]} must be equal")
    return q4, k4, v4


def cumulative_to_lengths(op: str, name: str, values, total: int) -> list[int]:
    """Per-sequence lengths from Ascend's cumulative list (trailing zeros drop sequences)."""
    if values is None:
        fail(op, f"input_layout TND needs {name} (cumulative sequence lengths, e.g. [2, 5, 9])")
    vals = [int(v) for v in values]
    while len(vals) > 1 and vals[-1] == 0:
        vals.pop()
    lens, prev = [], 0
    for v in vals:
        if v < prev:
            fail(op, f"{name} must be cumulative (non-decreasing), got {list(values)}")
        lens.append(v - prev)
        prev = v
    if prev > total:
        fail(op, f"{name} ends at {prev} but the tensor has only {total} tokens")
    return lens


def explicit_mask(op: str, mask: torch.Tensor, p: Problem, dtypes=MASK_DTYPES,
                  shapes: Optional[Sequence[tuple]] = None) -> torch.Tensor:
    """A full (non-compressed) mask as a 4-D tensor broadcastable to [B, N1, Sq, Skv]."""
    if not isinstance(mask, torch.Tensor):
        fail(op, f"atten_mask must be a Tensor, got {type(mask).__name__}")
    if mask.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        fail(op, f"atten_mask has dtype {mask.dtype}; it must be one of {names} (1/True = masked)")
    b, n, sq, skv = p.batch, p.heads, p.q_len, p.kv_len
    if p.packed:
        sq, skv = max(p.q_lens), max(p.kv_lens)
        allowed = [(sq, skv)]
    elif shapes is not None:
        allowed = list(shapes)
    else:
        allowed = [(sq, skv), (1, 1, sq, skv), (b, 1, sq, skv), (b, n, sq, skv)]
    if tuple(mask.shape) not in [tuple(s) for s in allowed]:
        fail(op, f"atten_mask has shape {tuple(mask.shape)}; expected one of "
                 f"{', '.join(str(tuple(s)) for s in allowed)}")
    m = mask
    if m.dim() == 3:
        m = m.unsqueeze(1) if m.shape[0] == b and b != 1 else m.unsqueeze(0)
    while m.dim() < 4:
        m = m.unsqueeze(0)
    return m


def check_compressed_mask(op: str, mask, sparse_mode: int, dtypes=MASK_DTYPES, allow_leading_ones=False) -> None:
    side = COMPRESSED_MASK_SIDE
    if not isinstance(mask, torch.Tensor) or mask.dtype not in dtypes:
        fail(op, f"sparse_mode {sparse_mode} needs the compressed bool atten_mask "
                 f"torch.triu(torch.ones({side}, {side}, dtype=torch.bool), diagonal=1)")
    shape = tuple(mask.shape)
    ok = shape == (side, side) or (allow_leading_ones and shape in ((1, side, side), (1, 1, side, side)))
    if not ok:
        fail(op, f"sparse_mode {sparse_mode} needs the compressed {side}x{side} atten_mask "
                 f"(torch.triu(torch.ones({side}, {side}, dtype=torch.bool), diagonal=1)), "
                 f"got shape {shape}")


def sparse_band(op: str, sparse_mode: int, pre_tokens: int, next_tokens: int, has_mask: bool,
                pre_name: str = "pre_tockens", next_name: str = "next_tockens") -> tuple[Band, bool]:
    """The band of an Ascend sparse mode, and whether the explicit mask is used elementwise.

    Without atten_mask the sparse mode and the token counts have no effect (full attention).
    """
    if not isinstance(sparse_mode, int) or sparse_mode < 0 or sparse_mode > 8:
        fail(op, f"sparse_mode must be 0..8, got {sparse_mode!r}")
    if sparse_mode > 4:
        fail(op, f"sparse_mode {sparse_mode} (prefix / varlen-split masks) is not supported by this "
                 f"runtime; supported are 0 (defaultMask), 1 (allMask), 2 (leftUpCausal), "
                 f"3 (rightDownCausal) and 4 (band)")
    if not has_mask:
        return Band(), False
    if sparse_mode == 0:
        return Band(lo=-_tokens(pre_tokens), hi=_tokens(next_tokens)), True
    if sparse_mode == 1:
        return Band(), True
    if sparse_mode == 2:
        return Band(hi=0), False
    if sparse_mode == 3:
        return Band(hi=0, bottom_right=True), False
    band = Band(lo=-_tokens(pre_tokens), hi=_tokens(next_tokens), bottom_right=True)
    if band.hi < band.lo:
        fail(op, f"sparse_mode 4 (band) needs {pre_name} + {next_name} >= 0 so the band is not empty, "
                 f"got {pre_name}={pre_tokens}, {next_name}={next_tokens}")
    return band, False


def _tokens(n: int) -> int:
    n = int(n)
    return UNBOUNDED if n >= ASCEND_TOKENS_MAX else n


def check_bias(op: str, name: str, bias: torch.Tensor, p: Problem, query: torch.Tensor) -> torch.Tensor:
    """A positional bias (pse) of shape [B|1, N1, Sq|1, Skv] as a 4-D tensor."""
    if not isinstance(bias, torch.Tensor):
        fail(op, f"{name} must be a Tensor, got {type(bias).__name__}")
    if bias.dtype != query.dtype:
        fail(op, f"{name} has dtype {bias.dtype} but query has {query.dtype}; they must match")
    if p.packed:
        fail(op, f"{name} is not supported with packed (TND) sequences by this runtime")
    b, n, sq, skv = p.batch, p.heads, p.q_len, p.kv_len
    allowed = [(b, n, sq, skv), (1, n, sq, skv), (b, n, 1, skv), (1, n, 1, skv)]
    if tuple(bias.shape) not in allowed:
        fail(op, f"{name} has shape {tuple(bias.shape)}; expected one of "
                 f"{', '.join(str(s) for s in allowed)} (BNSS, 1NSS, BN1S, 1N1S)")
    return bias
