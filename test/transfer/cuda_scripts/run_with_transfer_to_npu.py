"""Runs a CUDA script unmodified with ``import torch_npu.contrib.transfer_to_npu`` first.

``python run_with_transfer_to_npu.py script.py [args...]`` (also as torchrun's script):
the import, then the script as ``__main__`` with its own argv, as if its first line were
the import Ascend's migration guide tells users to add.
"""
import runpy
import sys

import torch_npu.contrib.transfer_to_npu  # noqa: F401

script, *arguments = sys.argv[1:]
sys.argv = [script, *arguments]
runpy.run_path(script, run_name="__main__")
