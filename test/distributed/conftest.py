"""Distributed tests launch real torchrun processes (see launcher.py); each has a hard timeout."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
