#!/usr/bin/env python
"""Walk the real torch_npu's public API listing and say what this package lacks.

``test/ascend/torch_npu_public_api.tsv`` (the real package's public-schema listing; or
``--listing PATH``) has one row per public name: ``kind``, ``name``, ``signature``. For
every ``python`` row the name is imported here and its ``inspect.signature`` compared
with the listed one: the listed parameters must come first with the same names, order,
kinds and defaults (annotations are ignored; a class is compared through its
constructor, as ``inspect.signature(cls)`` shows it). Parameters after them are allowed
only when every call written for the listed signature still binds the same way: extra
trailing parameters with defaults, ``*args`` or ``**kwargs``. ``aten`` rows must exist as
``torch.ops.npu.<name>`` or ``torch.ops.aten.<name>``; ``env`` rows must be documented in
README.md or docs/.

Names in the exceptions table (``docs/public_api_exceptions.md``) are ones that cannot be
simulated; ``exceptions_table()`` reads them. Names in the signature-deviations table
(``docs/public_api_signature_deviations.md``) are rows whose listed signature is not the one
Ascend documents and code calls (the listing caught a wrapper Ascend installs over the
operator only when ``torch_npu.onnx`` is imported); for them the signature the table gives
is compared instead, with the same rule.

Prints the names that are missing or differ, then the coverage per area. With
``--python`` prints the sorted list of failing names as a Python literal, the
``NOT_YET_PROVIDED`` list of ``test/ascend/test_public_api_listing.py`` (which must only
shrink). The functions are imported by that test, so both judge a name the same way.
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import os
import pathlib
import re
import sys
from dataclasses import dataclass
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_LISTING = pathlib.Path(os.environ.get(
    "TORCH_NPU_PUBLIC_API_LISTING", str(REPO / "test" / "ascend" / "torch_npu_public_api.tsv")))
EXCEPTIONS_TABLE = REPO / "docs" / "public_api_exceptions.md"
SIGNATURE_DEVIATIONS = REPO / "docs" / "public_api_signature_deviations.md"

# Areas whose names live under torch_npu.<area>; any other torch_npu.<name> is a top-level op.
AREAS = ("contrib", "testing", "optim", "utils", "npu", "profiler", "distributed", "jit", "multiprocessing",
         "HiFloat8Tensor")


@dataclass(frozen=True)
class Row:
    kind: str
    name: str
    signature: str


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: str | None  # source text of the default, None when required


def load_listing(path: pathlib.Path = DEFAULT_LISTING) -> list[Row]:
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            kind, name, *rest = line.rstrip("\n").split("\t")
            rows.append(Row(kind, name, rest[0] if rest else ""))
    return rows


def area_of(name: str) -> str:
    parts = name.split(".")
    if len(parts) > 2 and parts[1] in AREAS or (len(parts) == 2 and parts[1] in AREAS):
        return parts[1]
    return "top-level ops" if len(parts) == 2 else parts[1]


# -- resolving a dotted name ------------------------------------------------------------

_MISSING = object()


def _walk(obj: Any, parts: list[str]) -> Any:
    for part in parts:
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return _MISSING
    return obj


def resolve(name: str) -> Any:
    """The object a dotted name denotes, or raise LookupError.

    Either attribute access from the top package reaches it, or importing a module prefix
    and then attribute access does (``torch_npu.npu.mstx.mstx`` is the class ``mstx`` of
    the module ``torch_npu.npu.mstx``, while ``torch_npu.npu.mstx`` as an attribute is that
    class): the two ways Python code can spell the name.
    """
    parts = name.split(".")
    errors = []
    try:
        top = importlib.import_module(parts[0])
    except ImportError as exc:
        raise LookupError(f"cannot import {parts[0]}: {exc}") from exc
    found = _walk(top, parts[1:])
    if found is not _MISSING:
        return found
    for split in range(len(parts) - 1, 1, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            errors.append(f"{module_name}: {exc}")
            continue
        except Exception as exc:  # a module that fails at import is a failure to report, not to crash on
            errors.append(f"{module_name}: {type(exc).__name__}: {exc}")
            continue
        found = _walk(module, parts[split:])
        if found is not _MISSING:
            return found
    raise LookupError(f"{name} not found" + (f" ({errors[0]})" if errors else ""))


# -- signatures ---------------------------------------------------------------------------

_ANGLE = re.compile(r"<[^<>]*>")


def parse_listed_signature(text: str) -> list[Param]:
    """Parameters of a listed signature such as ``(x, *, dim: int = -1) -> Tensor``.

    Defaults that are reprs rather than Python (``<function fwd_only>``,
    ``<required parameter>``) are kept as text.
    """
    placeholders: dict[str, str] = {}

    def hide(match: re.Match) -> str:
        key = f"__angle_{len(placeholders)}__"
        placeholders[key] = match.group(0)
        return repr(key)

    source = _ANGLE.sub(hide, text)
    tree = ast.parse(f"def _listed{source}: pass")
    args = tree.body[0].args

    def default_text(node: ast.AST | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and node.value in placeholders:
            return placeholders[node.value]
        return ast.unparse(node)

    params: list[Param] = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        params.append(Param(arg.arg, kind, default_text(default)))
    if args.vararg:
        params.append(Param(args.vararg.arg, "VAR_POSITIONAL", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(Param(arg.arg, "KEYWORD_ONLY", default_text(default)))
    if args.kwarg:
        params.append(Param(args.kwarg.arg, "VAR_KEYWORD", None))
    return params


def _default_text(value: Any) -> str:
    text = repr(value)
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    text = re.sub(r"<module '([^']+)' from '[^']*'>", r"<module '\1'>", text)
    text = re.sub(r"<(function|class) ([\w.]+\.)?(\w+)>", lambda m: f"<{m.group(1)} {m.group(3)}>", text)
    if _ANGLE.fullmatch(text):
        return text
    try:
        return ast.unparse(ast.parse(text, mode="eval"))
    except SyntaxError:
        return text


def actual_signature(obj: Any) -> list[Param]:
    import torch

    if isinstance(obj, torch._ops.OpOverloadPacket):
        # An operator's Python face is (*args, **kwargs): its parameters are its schema's.
        overloads = obj.overloads()
        first = "default" if "default" in overloads else overloads[0]
        return _schema_signature(getattr(obj, first)._schema)
    signature = inspect.signature(obj)
    return [
        Param(p.name, p.kind.name, None if p.default is inspect.Parameter.empty else _default_text(p.default))
        for p in signature.parameters.values()
    ]


def _schema_signature(schema: Any) -> list[Param]:
    params = []
    for argument in schema.arguments:
        kind = "KEYWORD_ONLY" if argument.kwarg_only else "POSITIONAL_OR_KEYWORD"
        default = None if not argument.has_default_value() else _default_text(argument.default_value)
        params.append(Param(argument.name, kind, default))
    return params


def _format(params: list[Param]) -> str:
    out = []
    for p in params:
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p.kind, "")
        out.append(f"{prefix}{p.name}" + (f"={p.default}" if p.default is not None else ""))
    return "(" + ", ".join(out) + ")"


def check_python_row(row: Row) -> str | None:
    """None when the name exists with the listed signature, else why not."""
    try:
        obj = resolve(row.name)
    except LookupError as exc:
        return f"missing: {exc}"
    if not row.signature:
        return None
    documented = signature_deviations().get(row.name)
    listed = parse_listed_signature(row.signature if documented is None else documented[1])
    try:
        actual = actual_signature(obj)
    except (TypeError, ValueError) as exc:
        return f"no signature ({exc}); listed {row.signature}"
    if not signatures_compatible(listed, actual):
        return f"signature differs: listed {_format(listed)}, here {_format(actual)}"
    return None


def signatures_compatible(listed: list[Param], actual: list[Param]) -> bool:
    """The listed parameters first, unchanged; anything after them optional."""
    if actual[: len(listed)] != listed:
        return False
    return all(p.default is not None or p.kind in ("VAR_POSITIONAL", "VAR_KEYWORD") for p in actual[len(listed):])


def exceptions_table(path: pathlib.Path = EXCEPTIONS_TABLE) -> dict[str, tuple[str, str]]:
    """name -> (why it cannot be simulated, what calling it raises), from the markdown table."""
    table = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            table[cells[0].strip("`")] = (cells[1], cells[2])
    return table


@functools.lru_cache(maxsize=None)
def signature_deviations(path: pathlib.Path = SIGNATURE_DEVIATIONS) -> dict[str, tuple[str, str]]:
    """name -> (why the listed signature is not followed, the signature compared instead)."""
    table = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[2].startswith("`("):
            table[cells[0].strip("`")] = (cells[1], cells[2].strip("`"))
    return table


def check_aten_row(row: Row) -> str | None:
    import torch

    import torch_npu  # noqa: F401  (registers torch.ops.npu)

    packet_name, _, overload = row.name.partition(".")
    for namespace in (torch.ops.npu, torch.ops.aten):
        try:
            packet = getattr(namespace, packet_name)
        except AttributeError:
            continue
        if not overload or overload in packet.overloads():
            return None
    return f"missing: neither torch.ops.npu.{row.name} nor torch.ops.aten.{row.name}"


def _documentation() -> str:
    texts = [(REPO / "README.md").read_text()]
    texts += [p.read_text() for p in sorted((REPO / "docs").glob("**/*.md"))]
    return "\n".join(texts)


def check_env_row(row: Row, documentation: str) -> str | None:
    return None if re.search(rf"\b{re.escape(row.name)}\b", documentation) else "undocumented in README.md or docs/"


def walk(rows: list[Row]) -> dict[str, dict[str, str | None]]:
    """kind -> name -> problem (None when fine)."""
    documentation = _documentation()
    results: dict[str, dict[str, str | None]] = {"python": {}, "aten": {}, "env": {}}
    for row in rows:
        if row.kind == "python":
            results["python"][row.name] = check_python_row(row)
        elif row.kind == "aten":
            results["aten"][row.name] = check_aten_row(row)
        elif row.kind == "env":
            results["env"][row.name] = check_env_row(row, documentation)
    return results


def not_yet_provided_keys(results: dict[str, dict[str, str | None]]) -> list[str]:
    """The failing rows as the test's list keys: python names bare, ``aten:<name>``,
    ``env:<name>``; names of the exceptions table are not in it (they are judged there)."""
    table = exceptions_table()
    keys = [name for name, problem in results["python"].items() if problem is not None and name not in table]
    for kind in ("aten", "env"):
        keys += [f"{kind}:{name}" for name, problem in results[kind].items() if problem is not None]
    return sorted(keys)


def coverage_by_area(python_results: dict[str, str | None]) -> dict[str, tuple[int, int]]:
    """area -> (names present with the listed signature, names listed)."""
    counts: dict[str, list[int]] = {}
    for name, problem in python_results.items():
        entry = counts.setdefault(area_of(name), [0, 0])
        entry[1] += 1
        entry[0] += problem is None
    return {area: (ok, total) for area, (ok, total) in sorted(counts.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listing", type=pathlib.Path, default=DEFAULT_LISTING)
    parser.add_argument("--python", action="store_true",
                        help="print the failing rows as the NOT_YET_PROVIDED list literal of the listing test")
    parser.add_argument("--area", help="only report names of this area")
    args = parser.parse_args(argv)
    results = walk(load_listing(args.listing))
    failing = {n: p for n, p in results["python"].items() if p is not None
               and (args.area is None or area_of(n) == args.area)}
    if args.python:
        print("NOT_YET_PROVIDED = [")
        for key in not_yet_provided_keys(results):
            print(f"    {key!r},")
        print("]")
        return 0
    for name in sorted(failing):
        print(f"{name}: {failing[name]}")
    for kind in ("aten", "env"):
        for name, problem in sorted(results[kind].items()):
            if problem is not None:
                print(f"[{kind}] {name}: {problem}")
    print("\ncoverage (present with the listed signature / listed):")
    total_ok = total = 0
    for area, (ok, listed) in coverage_by_area(results["python"]).items():
        print(f"  {area:16s} {ok:4d} / {listed:4d}")
        total_ok += ok
        total += listed
    print(f"  {'python, all':16s} {total_ok:4d} / {total:4d}")
    for kind in ("aten", "env"):
        ok = sum(p is None for p in results[kind].values())
        print(f"  {kind:16s} {ok:4d} / {len(results[kind]):4d}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
