"""Inductor-compiled npu code inside torch.npu.graph: its kernels (host kernels launched
through the runtime's launch entry point) are recorded and re-run by replay."""
import torch

from graphs_compare import assert_close_to_cpu


def test_inductor_kernels_are_captured_and_replayed():
    def fn(x, y):
        return torch.softmax(x.sin() * 2 + y, dim=-1)

    compiled = torch.compile(fn, backend="inductor")
    static_x = torch.randn(4, 8, device="npu")
    static_y = torch.randn(4, 8, device="npu")
    compiled(static_x, static_y)  # compile and warm up outside the capture

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = compiled(static_x, static_y)
    for _ in range(3):
        x, y = torch.randn(4, 8), torch.randn(4, 8)
        static_x.copy_(x.npu())
        static_y.copy_(y.npu())
        g.replay()
        assert_close_to_cpu(out, fn(x, y))
