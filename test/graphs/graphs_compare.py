"""Comparison of npu results with CPU eager ones, shared by the graph tests."""
import torch


def assert_close_to_cpu(npu_value, cpu_value, **kw):
    """Compare an npu result (tensor or nested sequence) with its CPU eager counterpart."""
    if isinstance(npu_value, (list, tuple)):
        assert len(npu_value) == len(cpu_value)
        for a, b in zip(npu_value, cpu_value):
            assert_close_to_cpu(a, b, **kw)
        return
    assert npu_value.device.type == "npu", npu_value.device
    torch.testing.assert_close(npu_value.cpu(), cpu_value, **kw)
