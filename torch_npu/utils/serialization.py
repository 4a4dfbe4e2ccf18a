"""Checkpoints written in the background (``save_async``) and ``load``.

``save_async`` serialises ``obj`` at the call, exactly as ``torch.save`` would (device
tensors are copied to host memory then, so later training steps cannot change what is
saved), and writes the bytes to ``f`` on a background thread; a path is written to a
temporary file beside it and renamed into place, so a reader never sees half a file.
``wait_for_pending_saves()`` blocks until every save has reached its file.
``load`` is ``torch.load`` (npu tensors load back onto the npu device).
"""
from __future__ import annotations

import io
import os
import pickle
import threading
from typing import Any

import torch

__all__ = ["save_async", "load", "wait_for_pending_saves"]

_pending: list[threading.Thread] = []
_pending_lock = threading.Lock()
_errors: list[BaseException] = []


def _write(data: bytes, f) -> None:
    try:
        if isinstance(f, (str, os.PathLike)):
            path = os.fspath(f)
            tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
            with open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        else:
            f.write(data)
            if hasattr(f, "flush"):
                f.flush()
    except BaseException as exc:  # reported by wait_for_pending_saves; a thread cannot raise to the caller
        _errors.append(exc)


def save_async(obj: object, f, pickle_module: Any = pickle, pickle_protocol: int = 2,
               _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False,
               model: torch.nn.Module = None) -> None:
    """``torch.save(obj, f, ...)`` whose file write happens on a background thread.

    ``model`` is accepted for Ascend compatibility (there it makes the next backward wait
    for the copy out of device memory); here the copy is already done when this returns.
    """
    if model is not None and not isinstance(model, torch.nn.Module):
        raise TypeError(f"save_async: model must be a torch.nn.Module or None, got {type(model).__name__}")
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save_async: f must be a path or a writable binary file, got {type(f).__name__}")
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_module=pickle_module, pickle_protocol=pickle_protocol,
               _use_new_zipfile_serialization=_use_new_zipfile_serialization,
               _disable_byteorder_record=_disable_byteorder_record)
    writer = threading.Thread(target=_write, args=(buffer.getvalue(), f), name="torch_npu.save_async", daemon=False)
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(writer)
    writer.start()


def wait_for_pending_saves(timeout: float | None = None) -> None:
    """Blocks until every ``save_async`` has written its file; re-raises a write that failed."""
    with _pending_lock:
        writers = list(_pending)
    for t in writers:
        t.join(timeout)
    if _errors:
        exc = _errors.pop(0)
        _errors.clear()
        raise RuntimeError(f"save_async: writing a checkpoint failed: {exc}") from exc


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """``torch.load``: reads what ``torch.save``/``save_async`` wrote."""
    return torch.load(f, map_location=map_location, pickle_module=pickle_module, weights_only=weights_only,
                      mmap=mmap, **pickle_load_args)
