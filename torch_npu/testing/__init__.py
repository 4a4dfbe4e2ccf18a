"""``torch_npu.testing``: the test helpers Ascend's own operator tests are written with.

Test files written for the Ascend package start with
``from torch_npu.testing.testcase import TestCase, run_tests`` and
``from torch_npu.testing.common_utils import create_common_tensor``; this package gives
them the same names so those files run here unchanged, comparing the npu result with
the cpu one. Submodules load only when imported (nothing here is imported by
``import torch_npu``):

- ``testcase``: ``TestCase`` (``assertRtolEqual``, ``assertEqual(prec=...)``, ...) and ``run_tests``
- ``common_utils``: tensor factories (``create_common_tensor``), skip conditions
  (``SupportedDevices``, ``SkipIfNotGteCANNVersion``), ``freeze_rng_state``, ``Baseline``, ...
- ``common_distributed``: ``skipIfUnsupportMultiNPU``, ``with_comms``, ``init_pg``, ``TestSkip``
- ``decorator``: ``Dtypes``, ``Formats``, ``instantiate_tests``, ``instantiate_ops_tests``
- ``common_methods_invocations``: sample-input generators of the npu operator database
"""
