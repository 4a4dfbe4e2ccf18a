"""Adds the ``npu_backend`` entry to ``torch._inductor.config``.

Missing extension point: ``torch.compile(..., options=...)`` accepts only keys that exist
in ``torch._inductor.config``, and PyTorch 2.13 offers no way for an out-of-tree device to
declare an option of its own (``device_custom_config`` is not consulted by
``apply_options`` and is not patched per compile). So one entry is added to the config
module's ``_config`` table. It is data, not a replaced function, and it gives the whole
resolution order with torch's own machinery:

* ``options={"npu_backend": ...}`` (also spelled ``npu-backend``) is type-checked by
  ``torch.compile`` and applied per compile through ``config.patch``;
* ``torch._inductor.config.npu_backend = ...`` (per thread, as every config assignment);
* the environment variable ``TORCHINDUCTOR_NPU_BACKEND``, read once, here;
* ``"default"``.

Being an ordinary entry, the value is part of every config snapshot, hence of the FX-graph
cache key. Value checks (unknown names) happen in
``torch_npu.compiler.inductor.backend_registry`` before any backend module loads; it takes
the option's name, variable and default from ``torch_npu.compiler.npu_backend_option``,
as this patch does (importing either applies nothing and loads no module of the Inductor
layer).

Must be applied right after ``torch._inductor.config`` is first imported, before anything
snapshots that config (snapshots are cached per thread). Delete this patch once
PyTorch lets a device register its own ``torch.compile`` options.
"""
from __future__ import annotations

from torch_npu.compiler.npu_backend_option import DEFAULT, ENV_VAR, OPTION


def apply() -> None:
    """Add the entry once; a second call (or a torch that already has it) is a no-op."""
    from torch._inductor import config
    from torch.utils._config_module import Config, _ConfigEntry

    if OPTION in config._config:
        return
    entry = _ConfigEntry(
        Config(default=DEFAULT, env_name_default=ENV_VAR, value_type=str), OPTION
    )
    config._config[OPTION] = entry
    # A snapshot cached in this thread before now must pick the new key up.
    config._hash_dirty_var.set(True)
    config._mark_get_dict_dirty(OPTION)
