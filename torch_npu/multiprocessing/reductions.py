"""The rebuild functions Ascend names ``torch_npu.multiprocessing.reductions``: what the
receiving process calls, through ``pickle``, to rebuild an npu tensor or event sent by
``torch.multiprocessing``.

* ``rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls,
  dtype, storage_device, storage_handle, storage_size_bytes, storage_offset_bytes,
  requires_grad, ref_counter_handle, ref_counter_offset, event_handle,
  event_sync_required)``: the reducer ``import torch_npu`` registers
  (``torch_npu._tensor_sharing``) sends exactly these arguments; the storage is mapped
  from the sender's device memory, so writes on either side are seen by the other, as with
  CUDA IPC, and the sender keeps the memory until the receiver lets go of it.
* ``rebuild_npu_event(device, handle)``: ``torch.npu.Event.from_ipc_handle(device, handle)``
  for an event sent by pickling an ``interprocess=True`` event.
"""
from torch_npu._tensor_sharing import rebuild_npu_event, rebuild_npu_tensor

__all__ = ["rebuild_npu_event", "rebuild_npu_tensor"]
