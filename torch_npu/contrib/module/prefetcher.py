"""``Prefetcher``: copies the next ``(input, target)`` batch of a loader to the npu on a side
stream while the current batch is being used.

``next()`` makes the current stream wait for the copy, hands the batch over (recording it on
the current stream so the caching allocator does not reuse its memory early) and starts the
copy of the following batch. After the last batch it returns ``(None, None)``.
"""
import torch

__all__ = ["Prefetcher"]


class Prefetcher(object):
    """Args: ``loader`` (a DataLoader or any iterable of ``(input, target)`` tensor pairs),
    ``stream`` (the copy stream; default a new ``torch.npu.Stream()``: pass one when building
    many prefetchers, so that streams are not created for each)."""

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = stream if stream is not None else torch.npu.Stream()
        self.next_input = None
        self.next_target = None
        self.preload()

    def preload(self):
        """Take the loader's next batch and start its copy to the npu on ``self.stream``."""
        try:
            batch = next(self.loader)
        except StopIteration:
            self.next_input = None
            self.next_target = None
            return
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(f"Prefetcher: the loader must yield (input, target) pairs, got {type(batch).__name__}"
                            + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
        self.stream.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.stream):
            self.next_input, self.next_target = (t.npu(non_blocking=True) for t in batch)

    def next(self):
        """The prefetched ``(input, target)`` on the npu (``(None, None)`` when the loader is done)."""
        current = torch.npu.current_stream()
        current.wait_stream(self.stream)
        next_input, next_target = self.next_input, self.next_target
        for t in (next_input, next_target):
            if t is not None:
                t.record_stream(current)
        if next_target is not None:
            self.preload()
        return next_input, next_target
