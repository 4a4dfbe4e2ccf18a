"""torch.compile(mode="reduce-overhead") on npu tensors: correct results, and one clear
warning that NPU graphs need backend="npugraphs"."""
import warnings

import pytest
import torch

from graphs_compare import assert_close_to_cpu


def _notice_registered():
    from torch._inductor.codegen.common import custom_backend_passes

    from torch_npu.compiler.graph_trees.reduce_overhead import ReduceOverheadNotice

    return isinstance(custom_backend_passes.get("npu"), ReduceOverheadNotice)


def test_warning_helper_fires_once_and_only_under_the_mode(monkeypatch):
    from torch._inductor import config

    from torch_npu.compiler.graph_trees import reduce_overhead

    monkeypatch.setattr(reduce_overhead, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not reduce_overhead.warn_once_if_reduce_overhead()
        with config.patch({"triton.cudagraphs": True}):
            assert reduce_overhead.warn_once_if_reduce_overhead()
            assert not reduce_overhead.warn_once_if_reduce_overhead()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert "backend='npugraphs'" in messages[0] and "reduce-overhead" in messages[0]


def test_reduce_overhead_mode_on_npu_is_correct_and_warns_once(monkeypatch):
    from torch_npu.compiler.graph_trees import reduce_overhead

    monkeypatch.setattr(reduce_overhead, "_warned", False)

    def fn(x):
        return x.sin() * 3.25 - x.cos()

    compiled = torch.compile(fn, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(7)
            assert_close_to_cpu(compiled(x.npu()), fn(x))
    assert _notice_registered()
    messages = [str(w.message) for w in caught if "npugraphs" in str(w.message)]
    assert len(messages) == 1, messages
