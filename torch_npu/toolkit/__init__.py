"""The Ascend toolkit around the simulated device: what CANN installs next to a real card.

Client libraries written for Ascend machines look for more than ``torch_npu``: a CANN home
(``ASCEND_HOME_PATH`` with ``ascend_*_install.info`` version files, ``include``, ``lib64``),
the environment CANN's ``set_env.sh`` exports, the ``npu-smi`` tool, and the
``ASCEND_RT_VISIBLE_DEVICES`` selection of cards. This package provides them for the
simulated cards. Nothing here runs at ``import torch_npu``: the home is written and the
environment printed only when the user asks (``python -m torch_npu.toolkit``).
"""
