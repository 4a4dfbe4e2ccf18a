"""The options of an npugraph_ex compile, gathered in one picklable value."""
from __future__ import annotations


class CompilerConfig:
    """What ``get_npu_backend``/``get_compiler`` do with a graph.

    ``optimize_fx``: run the FX clean-ups of ``npu_fx_compiler._optimize_fx`` first.
    ``capture``: capture the optimized graph as an NPU graph (static inputs, replay).
    ``static_inputs``: treat every input as static (its memory is reused by replays).
    """

    def __init__(self) -> None:
        self.optimize_fx = True
        self.capture = True
        self.static_inputs = False

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in vars(self).items())
        return f"CompilerConfig({fields})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompilerConfig) and vars(self) == vars(other)
