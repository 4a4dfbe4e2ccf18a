"""The ``TORCH_LOGS`` names of torch_npu, registered with ``torch._logging``.

``TORCH_LOGS=npu`` shows every torch_npu logger at INFO (``+npu``: DEBUG, which includes
the artifacts below); each artifact can also be asked for alone:

- ``npu_setup``: which compile setup steps ran, when, and what triggered them;
- ``npu_inductor``: which npu Inductor backend a compile chose and where that choice came
  from (``options=``, ``torch._inductor.config``, the environment, the default), and
  every kernel the mlir backend handed back to the C++ path, with the reason;
- ``npu_graphs``: NPU graph records, replays and eager fallbacks, with their reasons.

``import torch`` validates ``TORCH_LOGS`` once, after loading the device backends
(autoload), and an unknown name there is an error. So the names are registered by the
autoload entry point and again by ``import torch_npu`` (idempotent); with autoload off
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) they do not exist yet when ``import torch`` reads
``TORCH_LOGS``: use ``TORCH_LOGS=+torch_npu`` (a module name, always accepted), or
``torch._logging.set_logs(modules={"npu": logging.DEBUG, "npu_graphs": True})`` after
``import torch_npu``.

Registering only fills torch._logging's tables: nothing is logged and nothing else is
imported here.
"""
from __future__ import annotations

LOG = "npu"
LOGGER_ROOT = "torch_npu"
ARTIFACTS: dict[str, str] = {
    "npu_setup": "torch_npu compile setup steps: which ran, when, triggered by what",
    "npu_inductor": "npu Inductor backend chosen per compile (and from where), mlir fallbacks with reasons",
    "npu_graphs": "NPU graph records, replays and eager fallbacks, with reasons",
}


def register() -> None:
    """Make the names known to ``torch._logging`` (``TORCH_LOGS``, ``set_logs``)."""
    from torch._logging import _internal

    registry = _internal.log_registry
    if LOG not in registry.log_alias_to_log_qnames:
        _internal.register_log(LOG, [LOGGER_ROOT])
    for name, description in ARTIFACTS.items():
        if name not in registry.artifact_names:
            _internal.register_artifact(name, description, visible=True)
