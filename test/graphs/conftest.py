"""Shared set-up for the NPU graph tests: the npu device, and compiled code and graph
trees reset between tests."""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


@pytest.fixture(autouse=True)
def _fresh_state():
    # Compiled code and recorded graphs of one test must not serve the next one.
    yield
    import sys

    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    trees = sys.modules.get("torch_npu.compiler.graph_trees")
    if trees is not None:
        trees.reset()
    for index in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(index))
    torch.npu.set_device(0)

