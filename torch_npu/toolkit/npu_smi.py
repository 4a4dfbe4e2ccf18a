"""``npu-smi``: the Ascend card management tool, answering for the simulated cards.

Monitoring scripts, launchers and cluster agents run ``npu-smi info`` and parse its table
(``| 0     910B3 | OK | ...`` rows, ``HBM-Usage(MB)`` as ``used / total``) or the
``key : value`` reports of ``npu-smi info -t <type> -i <id>``. This module prints the same
layouts for the ``TORCH_NPU_DEVICE_COUNT`` simulated cards of the model
``TORCH_NPU_DEVICE_MODEL`` names, with their HBM capacity. Like the real tool it lists
every card of the machine, whatever ``ASCEND_RT_VISIBLE_DEVICES`` selects for a process.
The cards have no power draw, temperature sensor or running kernels to report, so those
read as an idle card's, and memory in use reads 0 (the tool cannot see another process's
allocator).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

__all__ = ["main", "render_info", "render_list", "render_report"]

# Column widths of the real table, between the '|' separators.
_WIDTHS = (27, 15, 52)
_KEY_WIDTH = 31
_IDLE_POWER_W = 70.0
_IDLE_TEMP_C = 35


@dataclass(frozen=True)
class Card:
    card_id: int
    name: str          # as npu-smi prints it: "910B3", without the "Ascend" prefix
    hbm_mb: int

    @property
    def bus_id(self) -> str:
        return f"0000:{0xC1 + self.card_id:02X}:00.0"


def _cards() -> list[Card]:
    import torch_npu._C as _C
    from torch_npu.toolkit.cards import card_count

    props = _C._device_properties(0)  # every simulated card is the same model
    name = props["name"]
    name = name[len("Ascend"):] if name.startswith("Ascend") else name.replace(" ", "")
    return [Card(i, name, props["total_memory"] >> 20) for i in range(card_count())]


def _driver_version() -> str:
    from torch_npu.npu.cann_version import get_cann_version

    return get_cann_version("DRIVER")


def _border(fill: str = "-") -> str:
    return "+" + "+".join(fill * w for w in _WIDTHS) + "+"


def _row(*cells: str) -> str:
    return "|" + "|".join(f" {cell}".ljust(w) for cell, w in zip(cells, _WIDTHS)) + "|"


def _wide_row(text: str) -> str:
    return "|" + f" {text}".ljust(sum(_WIDTHS) + len(_WIDTHS) - 1) + "|"


def render_info(cards: list[Card], driver: str) -> str:
    """The ``npu-smi info`` overview: one two-line block per card, then the process table."""
    total = sum(_WIDTHS) + len(_WIDTHS) - 1
    lines = ["+" + "-" * total + "+",
             _wide_row(f"npu-smi {driver}".ljust(33) + f"Version: {driver}"),
             _border(),
             _row("NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"),
             _row("Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"),
             _border("=")]
    for card in cards:
        hugepages, memory, hbm = "0    / 0", "0    / 0", f"{0:<4} / {card.hbm_mb}"
        lines.append(_row(f"{card.card_id:<6}{card.name}", "OK", f"{_IDLE_POWER_W:<12.1f}{_IDLE_TEMP_C:<18}{hugepages}"))
        lines.append(_row("0", card.bus_id, f"{0:<12}{memory:<18}{hbm}"))
        lines.append(_border("="))
    lines.append(_border())
    lines.append(_row("NPU     Chip", "Process id", "Process name             | Process memory(MB)"))
    lines.append(_border("="))
    for card in cards:
        lines.append(_wide_row(f"No running processes found in NPU {card.card_id}"))
        lines.append(_border("="))
    return "\n".join(lines)


def _report(pairs: list[tuple[str, object]]) -> str:
    return "\n".join("" if key == "" else f"\t{key:<{_KEY_WIDTH}}: {value}" for key, value in pairs)


def render_list(cards: list[Card]) -> str:
    """``npu-smi info -l``: the card count, then each card's ids."""
    pairs: list[tuple[str, object]] = [("Total Count", len(cards))]
    for card in cards:
        pairs += [("", ""), ("NPU ID", card.card_id), ("Product Name", f"Ascend {card.name} (simulated)"),
                  ("Serial Number", f"SIM{card.card_id:010d}"), ("Chip Count", 1)]
    return _report(pairs)


def render_report(kind: str, card: Card, driver: str) -> str:
    """``npu-smi info -t <kind> -i <id>`` for ``usages``, ``memory`` or ``board``."""
    if kind == "usages":
        pairs = [("Memory Capacity(MB)", 0), ("Memory Usage Rate(%)", 0), ("Hugepages Total(page)", 0),
                 ("Hugepages Usage Rate(%)", 0), ("HBM Capacity(MB)", card.hbm_mb), ("HBM Usage Rate(%)", 0),
                 ("Aicore Usage Rate(%)", 0), ("Aivector Usage Rate(%)", 0), ("Aicpu Usage Rate(%)", 0),
                 ("Ctrlcpu Usage Rate(%)", 0), ("HBM Bandwidth Usage Rate(%)", 0), ("Chip ID", 0)]
    elif kind == "memory":
        pairs = [("NPU ID", card.card_id), ("Chip Count", 1), ("", ""), ("HBM Capacity(MB)", card.hbm_mb),
                 ("HBM Clock Speed(MHz)", 1600), ("HBM Usage(MB)", 0), ("HBM Temperature(C)", _IDLE_TEMP_C),
                 ("HBM Bandwidth Usage Rate(%)", 0), ("Chip ID", 0)]
    else:  # board
        pairs = [("NPU ID", card.card_id), ("Software Version", driver), ("Firmware Version", driver),
                 ("Compatibility", "OK"), ("Board ID", "0x0000"), ("PCB ID", "NA"), ("BOM ID", 0),
                 ("PCIe Bus Info", card.bus_id), ("Slot ID", card.card_id), ("Class ID", "NA"),
                 ("PCI Vendor ID", "0x19E5"), ("PCI Device ID", "0xD802"), ("Chip Count", 1)]
    return _report(pairs)


_REPORTS = ("usages", "memory", "board")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npu-smi", description="Ascend card management (simulated cards).")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="show the cards")
    info.add_argument("-l", dest="list_cards", action="store_true", help="list the cards")
    info.add_argument("-t", dest="kind", choices=_REPORTS, help="report of one card (with -i)")
    info.add_argument("-i", dest="card_id", type=int, help="the card id (see npu-smi info -l)")
    args = parser.parse_args(argv)
    try:
        cards = _cards()
        driver = _driver_version()
    except (RuntimeError, ValueError) as error:
        print(f"npu-smi: {error}", file=sys.stderr)
        return 1
    if args.list_cards:
        print(render_list(cards))
        return 0
    if args.kind is None:
        print(render_info(cards, driver))
        return 0
    if args.card_id is None:
        parser.error(f"-t {args.kind} needs the card id: npu-smi info -t {args.kind} -i ID")
    if not 0 <= args.card_id < len(cards):
        print(f"npu-smi: card {args.card_id} does not exist: the card ids are 0..{len(cards) - 1} "
              "(npu-smi info -l lists them; TORCH_NPU_DEVICE_COUNT sets how many)", file=sys.stderr)
        return 1
    print(render_report(args.kind, cards[args.card_id], driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
