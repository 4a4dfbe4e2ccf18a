"""Child side of test_multiprocessing_reductions: receives an npu tensor and an npu event
from the parent through a torch.multiprocessing queue, reports what it got and writes into
the tensor (which the parent then reads)."""


def receive_tensor_and_event(inbox, outbox):
    import torch

    import torch_npu  # noqa: F401  (the npu device)

    tensor, event = inbox.get(timeout=120)
    outbox.put((type(event).__name__, bool(event.query()), str(tensor.device), tensor.cpu().tolist()))
    tensor.mul_(10)
    torch.npu.synchronize()
    outbox.put("written")
