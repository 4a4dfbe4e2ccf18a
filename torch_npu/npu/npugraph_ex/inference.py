"""Compile-and-cache entry of npugraph_ex inference scripts.

``cache_compile(model.forward, cache_dir=...)`` returns the function compiled with the
``npugraph_ex`` backend. Each graph it compiles is also written, as readable Python (the
FX graph's code), to ``<cache_dir>/world<global_rank>_tp<tp_rank>_pp<pp_rank>/`` as
``graph_<n>.py``: the cache Ascend keeps of compiled graphs. ``readable_cache(path)``
prints and returns that text. Recompilation avoidance across processes is PyTorch's own
compile caches' business here; the files say what was compiled.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

import torch

__all__ = ["cache_compile", "readable_cache"]

_DEFAULT_CACHE_DIR = ".npugraph_ex_cache"


def _rank_dir(cache_dir: Any, global_rank: Any, tp_rank: Any, pp_rank: Any) -> str:
    for name, value in (("global_rank", global_rank), ("tp_rank", tp_rank), ("pp_rank", pp_rank)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"{name} must be a non-negative int or None, got {value!r}")
    if global_rank is None and torch.distributed.is_available() and torch.distributed.is_initialized():
        global_rank = torch.distributed.get_rank()
    root = os.fspath(cache_dir) if cache_dir is not None else _DEFAULT_CACHE_DIR
    return os.path.join(root, f"world{global_rank or 0}_tp{tp_rank or 0}_pp{pp_rank or 0}")


def cache_compile(func, *, dynamic: bool = True, cache_dir=None, global_rank=None, tp_rank=None, pp_rank=None,
                  **kwargs):
    """``func`` compiled with the npugraph_ex backend; its graphs are written under
    ``cache_dir`` (see the module doc). Extra keywords go to ``torch.compile``."""
    if not callable(func):
        raise TypeError(f"cache_compile expects a callable, got {type(func).__name__}")
    if not isinstance(dynamic, bool):
        raise TypeError(f"dynamic must be a bool, got {type(dynamic).__name__}")
    directory = _rank_dir(cache_dir, global_rank, tp_rank, pp_rank)
    os.makedirs(directory, exist_ok=True)
    count = [0]

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        import npugraph_ex

        path = os.path.join(directory, f"graph_{count[0]}.py")
        count[0] += 1
        with open(path, "w") as f:
            f.write(f"# npugraph_ex cache of {getattr(func, '__qualname__', func)!s}\n{gm.code}")
        return npugraph_ex.get_npu_backend()(gm, example_inputs)

    compiled = torch.compile(func, backend=backend, dynamic=dynamic, **kwargs)
    functools.update_wrapper(compiled, func)
    compiled.cache_dir = directory
    return compiled


def readable_cache(cache_bin, print_output=True, file=None) -> str:
    """The readable text of the cached graph ``cache_bin`` (a file written by
    ``cache_compile``, or its directory: every graph in it); printed to ``file``
    (default stdout) when ``print_output``."""
    path = os.fspath(cache_bin)
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".py"))
        if not names:
            raise FileNotFoundError(f"readable_cache: no cached graph in {path}")
        text = "\n".join(open(os.path.join(path, n)).read() for n in names)
    elif os.path.isfile(path):
        with open(path) as f:
            text = f.read()
    else:
        raise FileNotFoundError(f"readable_cache: {path} does not exist")
    if print_output:
        print(text, file=file if file is not None else sys.stdout)
    return text
