"""The npu stream sanitizer, ``torch.npu._sanitizer``: the twin of ``torch.cuda._sanitizer``.

Kernels on different npu streams run concurrently on hardware; touching the same memory
from two streams needs an event, ``wait_stream``, a synchronisation, or (for frees)
``record_stream``. The simulated device runs every kernel at once, so a missing one never
shows up as wrong numbers here, and shows up on hardware only sometimes. The sanitizer makes
it an error everywhere::

    TORCH_NPU_SANITIZER=1 python train.py        # or, in code:
    import torch_npu
    torch.npu._sanitizer.enable_npu_sanitizer()

It raises :class:`NPUSanitizerErrors` from the npu work that races, listing for each race
the tensor, the two accesses (operator, stream, argument, read or write, Python stack) and
where the memory was allocated:

- :class:`UnsynchronizedAccessError`: a kernel on one stream reads memory another stream
  wrote, or writes memory another stream read or wrote, with nothing ordering the two;
- :class:`FreedWhileInUseError`: memory freed while a stream other than the one it was
  allocated on may still use it, and then used again: the caching allocator hands a freed
  block out to the next allocations on its allocation stream, so the error is raised by
  the first work that touches memory allocated there since while not ordered after that
  use (code that makes the allocation stream wait before it allocates again, as FSDP2
  does, is correct). Call ``tensor.record_stream(stream)`` for each such stream, or make
  the allocation stream wait for it before it allocates again.

Work of the autograd engine runs on threads without Python frames: its accesses and
allocations name the autograd node (``MulBackward0``) and carry the stack of the forward
operation that created it.

Beyond CUDA's sanitizer it checks the work inside NPU graph replays (each replayed kernel,
on the replay stream), compiled Inductor kernels, and the hccl backend's collectives (on a
collective stream of their device, ordered after the caller's stream when issued; waiting
for the work or its Future (``get_future().wait()``, ``then()``, as DDP does) orders the
caller's stream after them); other work can be announced with
:func:`record_kernel`. It runs inside the runtime: each kernel
costs one Python stack capture (symbolised only for a report) and a few table lookups, so
it can stay on for a whole test suite; off, it costs nothing.
"""
# The implementation lives in one module with an absolute name, so torch.npu._sanitizer and
# torch_npu.npu._sanitizer (two module objects if imported under both names) share one set
# of error classes and one state.
from torch_npu.npu._stream_sanitizer import *  # noqa: F401,F403
from torch_npu.npu._stream_sanitizer import __all__  # noqa: F401
