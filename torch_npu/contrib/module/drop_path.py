"""``NpuDropPath``: stochastic depth (timm's ``DropPath``) whose per-sample random numbers
can be drawn ahead of time on a side stream (``enable_droppath_ensemble(model)``).

Each sample of the batch is kept with probability ``1 - drop_prob`` (and scaled by
``1 / (1 - drop_prob)``) or zeroed whole. As with ``NpuCachedDropout``, a forward that finds
no ready random tensor draws one at once (the real layer skips drop-path for that call).
"""
import torch
from torch import nn

from ._keep_masks import check_probability

__all__ = ["NpuDropPath"]


class _RandomQueue:
    """The ready per-sample random tensors of one ``(shape, device, dtype, ndim)`` key."""

    def __init__(self, shape, device, dtype, ndim, drop_prob):
        self.shape = shape
        self.device = device
        self.dtype = dtype
        self.ndim = ndim
        self.drop_prob = drop_prob
        self.request_count = 0
        self.rand_queue = []

    def draw(self):
        return torch.rand((self.shape[0],) + (1,) * (self.ndim - 1), dtype=self.dtype, device=self.device)


def _drop_path(x, random_tensor, keep_prob):
    return x.div(keep_prob) * torch.floor(random_tensor + keep_prob)


class NpuDropPath(nn.Module):
    """Args: ``drop_prob`` the probability of dropping a sample's path (None: 0)."""

    task_dict = {}
    droppath_stream = None

    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = check_probability("NpuDropPath", 0.0 if drop_prob is None else drop_prob)
        self.keep_prob = 1 - self.drop_prob

    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            raise RuntimeError(f"NpuDropPath: input must be a Tensor, got {type(x).__name__}")
        if self.drop_prob == 0.0 or not self.training:
            return x
        if self.keep_prob == 0.0:
            return x * 0
        key = (tuple(x.shape), x.device, x.dtype, x.ndim)
        queue = NpuDropPath.task_dict.get(key)
        if queue is None:
            queue = NpuDropPath.task_dict[key] = _RandomQueue(tuple(x.shape), x.device, x.dtype, x.ndim,
                                                               self.drop_prob)
        if queue.rand_queue:
            random_tensor = queue.rand_queue.pop(0)
        else:
            queue.request_count += 1
            random_tensor = queue.draw()
        return _drop_path(x, random_tensor, self.keep_prob)

    @classmethod
    def enable_droppath_ensemble(cls, model):
        """Before each forward of ``model``, draw its drop-path random tensors on a side stream;
        the forward then waits for that stream."""
        if cls.droppath_stream is None:
            cls.droppath_stream = torch.npu.Stream()

        def draw_random_tensors(module, inputs):
            cls.droppath_stream.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(cls.droppath_stream), torch.no_grad():
                for queue in cls.task_dict.values():
                    if queue.device.type != "npu":
                        continue
                    while len(queue.rand_queue) < queue.request_count:
                        queue.rand_queue.append(queue.draw())

        def wait_for_random_tensors(module, inputs):
            torch.npu.current_stream().wait_stream(cls.droppath_stream)

        # Drawing first, then waiting: the forward sees the tensors drawn for it.
        model.register_forward_pre_hook(draw_random_tensors)
        model.register_forward_pre_hook(wait_for_random_tensors)
