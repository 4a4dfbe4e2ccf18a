"""The per-call checks of a recorded graph of the graph trees: borrowed addresses and the
input signature, on the argument lists a compiled graph can be called with."""
import torch

import torch_npu  # noqa: F401
import torch_npu._C as _C
from torch_npu.compiler.graph_trees.recorded_graph import RecordedGraph


def _recorded(weight):
    x = torch.randn(4, device="npu")
    graph = RecordedGraph.record(
        lambda args: [args[0] * args[1] + 1],
        [weight, x],
        is_borrowed=lambda i, a: i == 0,
        mutated_idxs=set(),
        num_user_outputs=None,
        stream=torch.npu.Stream(),
        pool=None,
        name="matching",
    )
    return graph, x


def test_borrowed_address_decides_a_match_and_the_replay_computes_on_the_new_input():
    weight = torch.randn(4, device="npu")
    graph, x = _recorded(weight)
    assert graph.matches([weight, x])
    assert graph.matches([weight.view(4), torch.zeros(4, device="npu")])  # same address, new object
    assert not graph.matches([weight.clone(), x])
    assert not graph.matches([None, x])
    assert not graph.matches([])  # too short: no match, no read past the list
    y = torch.randn(4, device="npu")
    (out,) = graph.run([weight, y], generation=(1, 0))
    torch.testing.assert_close(out.cpu(), weight.cpu() * y.cpu() + 1)


def test_input_signature_reads_indices_in_place_and_falls_back_on_other_kinds():
    t = torch.randn(2, 3, device="npu")
    key = _C._graph_input_signature([t, 3, 1.5, None, True], [0, 1, 2, 3, 4])
    assert key == _C._graph_input_signature([t.clone(), 3, 1.5, None, True], [0, 1, 2, 3, 4])
    assert key != _C._graph_input_signature([t.t(), 3, 1.5, None, True], [0, 1, 2, 3, 4])
    assert key != _C._graph_input_signature([t, 4, 1.5, None, True], [0, 1, 2, 3, 4])
    assert _C._graph_input_signature([t, "s"], [0, 1]) is None  # built in Python instead
    assert _C._graph_input_signature([t], [0, 1]) is None  # index past the list
    assert _C._graph_input_signature([t, 3], [1]) == _C._graph_input_signature([None, 3], [1])
