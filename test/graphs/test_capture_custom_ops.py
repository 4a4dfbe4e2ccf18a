"""NPU graph capture of operators registered through torch.library.

An operator of a library reaches the npu through the fallback, which records it into a
capture: its outputs get their geometry from its meta kernel and their memory from the
graph's pool, and replay copies the CPU kernel's results there. Outputs of an operator that
returns a list and a tensor land each in its own place at replay (element k of list return
r and return r' are distinct slots; element 0 of return 0 once received return 1).
"""
import torch

from graphs_compare import assert_close_to_cpu

_lib = torch.library.Library("npu_capture_test", "DEF")
_lib.define("parts_and_total(Tensor x) -> (Tensor[], Tensor)")


def _parts_and_total(x):
    return [x * 2, x * 3], x.sum()


def _parts_and_total_meta(x):
    return [torch.empty_like(x), torch.empty_like(x)], x.new_empty(())


_lib.impl("parts_and_total", _parts_and_total, "CPU")
_lib.impl("parts_and_total", _parts_and_total_meta, "Meta")


def test_list_and_tensor_returns_replay_into_their_own_outputs():
    x = torch.randn(5).npu()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        parts, total = torch.ops.npu_capture_test.parts_and_total(x)
    for _ in range(2):
        new = torch.randn(5)
        x.copy_(new.npu())
        for p in parts:
            p.fill_(-7)
        total.fill_(-7)
        g.replay()
        want_parts, want_total = _parts_and_total(new)
        assert_close_to_cpu(parts[0], want_parts[0])
        assert_close_to_cpu(parts[1], want_parts[1])
        assert_close_to_cpu(total, want_total)
