"""The one place where torch_npu's compiler integration is set up, and the moment it happens.

``import torch_npu`` must not import Dynamo or Inductor, yet the npu integration has to be
in place before Dynamo traces anything or Inductor takes its first config snapshot. This
module bridges the two without wrapping any torch function: ``install()`` puts a
post-import finder at the front of ``sys.meta_path``. The finder answers no import itself;
for a watched module it asks the remaining finders for the real spec and only wraps the
loader, so the setup steps run right after the module's own code, whoever imported it
(torch.compile, torch.export, torch.onnx, list_backends, a user). Once every watched module
has been seen, the finder leaves ``sys.meta_path``; from then on it costs nothing.

The steps are named and run under a run-once guard (see ``_RunOnce``). A step that fails
inside an import hook does not fail the import (a half-imported ``torch._dynamo`` cannot be
imported again), it is reported as a warning and retried, raising this time, by the next
trigger: the start of the next Dynamo compile, a lookup of one of our backends, or
``ensure_setup()``.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch._logging

from torch_npu._startup.import_delegation import find_spec_elsewhere

# TORCH_LOGS=npu_setup: each step, what triggered it, when and how long it took.
_setup_log = torch._logging.getArtifactLogger(__name__, "npu_setup")
_IMPORTED_AT = time.perf_counter()

# Watched module -> the setup steps its first import triggers. The step functions live in
# torch_npu._startup.setup_steps, which is imported only when a step runs, i.e. after the
# watched module is loaded. torch._dynamo imports torch._inductor.config while it loads,
# so the config option is added first; torch._inductor.compile_fx is imported only by
# Inductor compiles, so our Inductor layer loads only for those. FlexAttention checks its
# inputs' device before it imports Dynamo, so its module is watched itself.
_INDUCTOR_CONFIG = "torch._inductor.config"
_INDUCTOR_COMPILE = "torch._inductor.compile_fx"
_DYNAMO = "torch._dynamo"
_FLEX_ATTENTION = "torch.nn.attention.flex_attention"
_STEPS_MODULE = "torch_npu._startup.setup_steps"
STEPS: dict[str, tuple[str, ...]] = {
    _INDUCTOR_CONFIG: ("inductor_option",),
    _DYNAMO: (
        "device_interface",
        "trace_rules",
        "stream_handlers",
        "graphsafe_rng",
        "rng_prims",
        "backends",
        "transfer_to_npu_tracing",
    ),
    _INDUCTOR_COMPILE: ("inductor_registration", "fused_op_decompositions", "reduce_overhead_policy"),
    _FLEX_ATTENTION: ("flex_attention_device", "flex_attention_autocast"),
}


@dataclass(frozen=True)
class SetupState:
    """A read-only snapshot of the setup, for tests and diagnostics."""

    done: tuple[str, ...]  # steps that succeeded, in the order they ran
    failed: tuple[tuple[str, str], ...]  # (step, error) of steps whose last run failed
    runs: tuple[tuple[str, int], ...]  # (step, how many times it was attempted)
    watching: tuple[str, ...]  # watched modules not imported yet
    finder_installed: bool


class _RunOnce:
    """Runs named steps at most once each, successfully.

    Concurrent first callers wait on one re-entrant lock, so they see the steps done by
    whoever got there first. Re-entrant because a step may reach ``run`` again in the same
    thread (a backend lookup calls ``ensure_setup``); steps in progress are then skipped.
    Success is recorded per step; a failure is recorded and re-raised, and the step runs
    again on the next call. A forked child gets a fresh lock (the parent's could be held
    by a thread that does not exist in the child) and no in-progress marks; completed steps
    stay completed because their effects were copied with the memory.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.done: list[str] = []
        self.running: set[str] = set()
        self.failed: dict[str, str] = {}
        self.runs: dict[str, int] = {}

    def run(
        self, names: tuple[str, ...], resolve: Callable[[str], Callable[[], None]], trigger: str = "ensure_setup()"
    ) -> None:
        if all(name in self.done for name in names):  # fast path, no lock
            return
        with self.lock:
            for name in names:
                if name in self.done or name in self.running:
                    continue
                self.running.add(name)
                self.runs[name] = self.runs.get(name, 0) + 1
                started = time.perf_counter()
                try:
                    resolve(name)()
                except BaseException as exc:
                    self.failed[name] = f"{type(exc).__name__}: {exc}"
                    _setup_log.debug(
                        "setup step %s failed after %.1f ms (attempt %d, triggered by %s): %s",
                        name, (time.perf_counter() - started) * 1e3, self.runs[name], trigger, self.failed[name],
                    )
                    raise
                finally:
                    self.running.discard(name)
                self.failed.pop(name, None)
                self.done.append(name)
                _setup_log.debug(
                    "setup step %s ran in %.1f ms, %.3f s after import torch_npu (triggered by %s)",
                    name, (time.perf_counter() - started) * 1e3, started - _IMPORTED_AT, trigger,
                )

    def after_fork_in_child(self) -> None:
        self.lock = threading.RLock()
        self.running = set()


_guard = _RunOnce()
_watching: dict[str, tuple[str, ...]] = {}


def _resolve_step(name: str) -> Callable[[], None]:
    steps = importlib.import_module(_STEPS_MODULE)
    return getattr(steps, name)


def _steps_due() -> tuple[str, ...]:
    """Steps whose watched module is loaded (Inductor's config before Dynamo's steps)."""
    due: list[str] = []
    for module, names in STEPS.items():
        if _is_loaded(module):
            due.extend(names)
    return tuple(due)


def _is_loaded(name: str) -> bool:
    module = sys.modules.get(name)
    if module is None:
        return False
    spec = getattr(module, "__spec__", None)
    return not getattr(spec, "_initializing", False)


def ensure_setup(trigger: str = "ensure_setup()") -> None:
    """Run every step whose watched module is loaded and that has not succeeded yet.

    Raises the error of a failing step. Cheap once everything has run. ``trigger`` names
    the caller in the ``npu_setup`` log.
    """
    _guard.run(_steps_due(), _resolve_step, trigger)


def state() -> SetupState:
    return SetupState(
        done=tuple(_guard.done),
        failed=tuple(sorted(_guard.failed.items())),
        runs=tuple(sorted(_guard.runs.items())),
        watching=tuple(_watching),
        finder_installed=_finder in sys.meta_path,
    )


def _on_watched_import(module_name: str, trigger: str | None = None) -> None:
    """Called right after a watched module's code ran, with its import lock still held."""
    _watching.pop(module_name, None)
    if not _watching:
        _remove_finder()
    try:
        _guard.run(STEPS[module_name], _resolve_step, trigger or f"the first import of {module_name}")
    except Exception as exc:  # the import itself must not fail, see the module docstring
        warnings.warn(
            f"torch_npu compiler setup failed after importing {module_name} ({exc}); "
            "it is retried when the next compile starts",
            RuntimeWarning,
            stacklevel=2,
        )
    if _guard.failed:
        _register_retry()


def _register_retry() -> None:
    """Retry failed steps at the start of the next Dynamo compile (raising if they fail).

    Dynamo's compile-start callbacks are a public registration; the callback stays
    registered but does nothing once all steps succeeded (removing a callback while Dynamo
    iterates its list would skip the next one).
    """
    if not _is_loaded(_DYNAMO):
        return
    from torch._dynamo.callback import callback_handler

    # torch._dynamo.reset() clears the callbacks, so look rather than remember.
    if _retry_failed_setup not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_retry_failed_setup)


def _retry_failed_setup(_args: object) -> None:
    if not all(name in _guard.done for name in _steps_due()):
        ensure_setup("a retry at the start of a Dynamo compile")


class _HookedLoader:
    """Loads a watched module with its real loader, then runs the setup steps.

    The real loader is put back on the spec and module before the module's code runs, so
    the imported module is indistinguishable from one imported without torch_npu.
    """

    def __init__(self, loader: object, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec):  # noqa: ANN001 - importlib protocol
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module) -> None:  # noqa: ANN001 - importlib protocol
        spec = module.__spec__
        spec.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _on_watched_import(self._name)


class _PostImportFinder:
    """A meta path finder that finds nothing itself; see the module docstring."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib protocol
        if fullname not in _watching:
            return None
        spec = find_spec_elsewhere(self, fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookedLoader(spec.loader, fullname)
        return spec

    def invalidate_caches(self) -> None:
        pass


_finder = _PostImportFinder()


def _remove_finder() -> None:
    # Rebind instead of removing in place: another thread may be iterating the list in
    # its own import right now, and an in-place removal would make it skip a finder.
    if _finder in sys.meta_path:
        sys.meta_path = [finder for finder in sys.meta_path if finder is not _finder]


def install() -> None:
    """Watch the modules whose import triggers setup; run what is due already.

    Called by ``import torch_npu``. If Dynamo was imported first, its steps run now.
    Idempotent.
    """
    for module_name in STEPS:
        if not _is_loaded(module_name) and not any(
            name in _guard.done for name in STEPS[module_name]
        ):
            _watching[module_name] = STEPS[module_name]
    if _watching and _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    for module_name in STEPS:
        if _is_loaded(module_name):
            _on_watched_import(module_name, f"import torch_npu ({module_name} was imported before)")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _guard.after_fork_in_child())
