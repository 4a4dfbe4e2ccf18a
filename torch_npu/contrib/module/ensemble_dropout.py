"""``NpuCachedDropout`` (alias ``NpuFairseqDropout``): dropout whose masks can be drawn ahead
of time on a side stream.

On Ascend, drawing a dropout mask costs a kernel launch in the middle of the forward pass; this
layer lets a model draw next iteration's masks on a separate stream right after its forward
(``enable_dropout_ensemble(model)``), so the forward only pops a ready mask. Masks are keyed
by ``(shape, dtype, device, p)``; each key remembers how many masks one forward pass asked
for, and the hook tops each queue up to that count.

Differences from the real package, on purpose: a forward that finds no ready mask draws one
at once (the real layer then skips dropout for that call), and the layer is the identity in
eval mode, as ``torch.nn.Dropout`` is. Calling the layer with ``[shape, dtype, device]``
instead of a tensor returns the keep-mask itself (uint8, 1 = keep), which is how
``MultiheadAttention`` gets its attention-dropout mask; it returns None when nothing is
dropped (``p == 0`` or eval mode).
"""
import torch

from ._keep_masks import apply_keep_mask, check_probability, draw_keep_mask

__all__ = ["NpuCachedDropout", "NpuFairseqDropout"]


class _MaskQueue:
    """The ready masks of one ``(shape, dtype, device, p)`` key."""

    def __init__(self, shape, dtype, device, p):
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.p = p
        self.request_count = 0
        self.mask_queue = []


class NpuCachedDropout(torch.nn.Dropout):
    """Args: ``p`` the probability of an element to be zeroed; ``module_name`` the owning
    module's name (informational)."""

    task_dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(check_probability(type(self).__name__, p))
        self.module_name = module_name

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            shape, dtype, device, want_mask = tuple(x.shape), x.dtype, x.device, False
        elif isinstance(x, (list, tuple)) and len(x) == 3:
            shape, dtype, device = x
            shape, device, want_mask = tuple(shape), torch.device(device), True
        else:
            raise RuntimeError(f"{type(self).__name__}: input must be a Tensor, or a [shape, dtype, device] list to "
                               f"ask for a keep-mask; got {type(x).__name__}")
        if self.p == 0 or not self.training:
            return None if want_mask else x
        mask = self._next_mask(shape, dtype, device)
        return mask if want_mask else apply_keep_mask(x, mask, self.p)

    def _next_mask(self, shape, dtype, device):
        key = (shape, dtype, device, self.p)
        queue = NpuCachedDropout.task_dict.get(key)
        if queue is None:
            queue = NpuCachedDropout.task_dict[key] = _MaskQueue(shape, dtype, device, self.p)
        if queue.mask_queue:
            mask, ready = queue.mask_queue.pop(0)
            if ready is not None:
                torch.npu.current_stream().wait_event(ready)
            return mask
        queue.request_count += 1
        return draw_keep_mask(shape, self.p, device)

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Draw the masks of ``model``'s dropout layers after each of its forward passes on a
        side stream; its next forward waits for that stream before it starts."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait_for_masks(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def draw_next_masks(module, inputs, outputs):
            cls.dropout_stream.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(cls.dropout_stream):
                for queue in cls.task_dict.values():
                    if queue.device.type != "npu":
                        continue
                    while len(queue.mask_queue) < queue.request_count:
                        mask = draw_keep_mask(queue.shape, queue.p, queue.device)
                        ready = torch.npu.Event()
                        ready.record(cls.dropout_stream)
                        queue.mask_queue.append((mask, ready))

        model.register_forward_pre_hook(wait_for_masks)
        model.register_forward_hook(draw_next_masks)


NpuFairseqDropout = NpuCachedDropout
