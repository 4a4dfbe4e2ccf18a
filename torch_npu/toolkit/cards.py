"""The simulated cards as the host sees them, before any process selects among them.

``npu-smi`` lists every card of the machine (``TORCH_NPU_DEVICE_COUNT`` of them), while a
process sees only those ``ASCEND_RT_VISIBLE_DEVICES`` selects, renumbered from 0 in the
order listed. Both rules live here so the tool and the runtime agree; the variables are
read through ``torch_npu._env_settings`` with the C++ runtime's rules
(``torch_npu/csrc/runtime/device.cpp``).
"""
from __future__ import annotations

from torch_npu import _env_settings

__all__ = ["card_count", "visible_card_ids"]


def card_count() -> int:
    """How many simulated cards the machine has (``TORCH_NPU_DEVICE_COUNT``, default 2)."""
    return _env_settings.read_integer(
        "TORCH_NPU_DEVICE_COUNT", 2, 1, 64,
        "an integer between 1 and 64, the number of simulated npu devices (unset, there are 2)",
    )


def visible_card_ids() -> list[int]:
    """The card behind each device index of this process: device ``i`` is card
    ``visible_card_ids()[i]`` (all cards in order when ``ASCEND_RT_VISIBLE_DEVICES`` is unset)."""
    cards = card_count()
    accepted = (
        f"a comma-separated list of distinct card ids between 0 and {cards - 1} (there are {cards} "
        "simulated cards; TORCH_NPU_DEVICE_COUNT sets how many), e.g. ASCEND_RT_VISIBLE_DEVICES=1,0"
    )
    ids = _env_settings.read_distinct_ids("ASCEND_RT_VISIBLE_DEVICES", cards, accepted)
    return list(range(cards)) if ids is None else ids
