"""Optional helpers that change how other code runs; each is opt-in by importing it.

``torch_npu.contrib.transfer_to_npu`` runs CUDA scripts on npu.
"""
