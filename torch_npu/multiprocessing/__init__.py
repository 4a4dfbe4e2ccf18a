"""Ascend's ``torch_npu.multiprocessing``: how npu tensors and events cross process
boundaries (``reductions``). ``import torch_npu`` already registers the reducers, so
``torch.multiprocessing`` queues and DataLoader workers carry npu tensors without importing
this package.
"""
