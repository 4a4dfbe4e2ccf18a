"""FX pattern rewrites of npugraph_ex: ``register_replacement(search_fn, replace_fn, ...)``.

A thin layer over Inductor's pattern matcher (the same arguments as
``torch._inductor.pattern_matcher.register_replacement``, with the pass owned here):
each registered pattern is searched in the graphs ``torch_npu.npu.npugraph_ex.compile_fx``
compiles and replaced before capture. Importing this module loads Inductor's pattern
matcher, so it loads only when a pattern is registered.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

import torch
from torch._inductor.pattern_matcher import (
    Match,
    PatternExpr,
    PatternMatcherPass,
    ReplaceFn,
    SearchFn,
    TraceFn,
    _return_true,
    fwd_only,
)
from torch._inductor.pattern_matcher import register_replacement as _inductor_register_replacement

__all__ = ["register_replacement", "apply_registered_patterns"]

_npugraph_ex_patterns = PatternMatcherPass(pass_name="npugraph_ex_patterns")


def register_replacement(
    search_fn: SearchFn,
    replace_fn: ReplaceFn,
    example_inputs: Iterable[Any],
    trace_fn: TraceFn = fwd_only,
    extra_check: Callable[[Match], bool] = _return_true,
    search_fn_pattern: Optional[PatternExpr] = None,
    scalar_workaround: Optional[dict[str, Union[float, int]]] = None,
    skip_duplicates: bool = False,
):
    """Replace every match of ``search_fn`` (traced on ``example_inputs`` by ``trace_fn``)
    with ``replace_fn`` in the graphs npugraph_ex compiles; ``extra_check`` vetoes a match.
    Returns what Inductor's ``register_replacement`` does (falsy when nothing was registered)."""
    if not callable(search_fn) or not callable(replace_fn):
        raise TypeError("register_replacement: search_fn and replace_fn must be callables")
    return _inductor_register_replacement(
        search_fn,
        replace_fn,
        list(example_inputs),
        trace_fn,
        _npugraph_ex_patterns,
        extra_check=extra_check,
        scalar_workaround=scalar_workaround,
        search_fn_pattern=search_fn_pattern,
        skip_duplicates=skip_duplicates,
    )


def apply_registered_patterns(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite ``gm`` with every registered pattern (in place); returns it."""
    if _npugraph_ex_patterns.apply(gm.graph):
        gm.graph.lint()
        gm.recompile()
    return gm
