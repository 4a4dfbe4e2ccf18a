"""Test decorators that skip a test when the simulated environment lacks what it needs.

They answer from the simulator's own description of itself: the card model
(``TORCH_NPU_DEVICE_MODEL``, via ``torch.npu.get_device_name``), the simulated CANN
version (``torch_npu.npu.cann_version``), LAPACK in the cpu build, and whether an
operator is registered. Each works on a test method or a whole ``TestCase`` class.
"""
from __future__ import annotations

import functools
import unittest
from typing import Any, Callable, List

import torch

__all__ = ["SupportedDevices", "SkipIfNotGteCANNVersion", "SkipIfNoLapack", "SkipIfNotRegistered"]


def SupportedDevices(supported_devices: List[str]) -> Callable:  # noqa: N802  (Ascend's name)
    """Run the test only on the listed cards (``["Ascend910B"]`` matches every 910B model,
    ``"Ascend910B4"`` only that one); other cards, and the generic simulated device, skip.
    The card is the one ``TORCH_NPU_DEVICE_MODEL`` selects."""
    if isinstance(supported_devices, str) or not all(isinstance(d, str) for d in supported_devices):
        raise TypeError(f"SupportedDevices takes a list of card names, got {supported_devices!r}")
    wanted = list(supported_devices)

    def decorate(test: Callable) -> Callable:
        def is_unsupported() -> bool:
            name = torch.npu.get_device_name()
            return not any(name.startswith(card) for card in wanted)

        return _skip_when(is_unsupported, f"runs only on {', '.join(wanted)}")(test)

    return decorate


def SkipIfNotGteCANNVersion(base_version, module="CANN") -> Callable:  # noqa: N802
    """Skip the test unless the simulated ``module`` (``"CANN"`` by default) is at least
    ``base_version`` (``"8.1.RC1"``)."""
    from torch_npu.npu.cann_version import _is_gte_cann_version, _parse

    _parse(base_version)  # a malformed version is an error at decoration time

    def decorate(test: Callable) -> Callable:
        return _skip_when(lambda: not _is_gte_cann_version(base_version, module),
                          f"needs {module} >= {base_version}")(test)

    return decorate


def SkipIfNoLapack() -> Callable:  # noqa: N802
    """Skip the test when the cpu build has no LAPACK (npu linear algebra runs on it)."""

    def decorate(test: Callable) -> Callable:
        return _skip_when(lambda: not torch._C.has_lapack, "PyTorch compiled without LAPACK")(test)

    return decorate


def SkipIfNotRegistered() -> Callable:  # noqa: N802
    """Skip a test named ``test_<op>...`` when no ``torch.ops.npu.<op>`` / ``torch_npu.<op>``
    or ``torch.<op>`` is registered (the op is taken from the test's name)."""

    def decorate(test: Callable) -> Callable:
        op = _op_of_test_name(getattr(test, "__name__", ""))

        def is_unregistered() -> bool:
            import torch_npu

            return op is None or not (hasattr(torch_npu, op) or hasattr(torch.ops.npu, op) or hasattr(torch, op))

        return _skip_when(is_unregistered, f"operator {op!r} is not registered")(test)

    return decorate


def _op_of_test_name(name: str) -> str | None:
    if not name.startswith("test_"):
        return None
    parts = name[len("test_"):].split("_")
    # The longest prefix of the name's words that names an operator.
    import torch_npu

    for end in range(len(parts), 0, -1):
        candidate = "_".join(parts[:end])
        if hasattr(torch_npu, candidate) or hasattr(torch.ops.npu, candidate) or hasattr(torch, candidate):
            return candidate
    return parts[0] if parts else None


def _skip_when(condition: Callable[[], bool], reason: str) -> Callable:
    """Decorate a test function or class so that it skips when ``condition()`` holds.

    The condition is asked when the test runs, not when it is decorated, so importing a
    test file never initialises the device and an environment variable set before the
    run is what counts.
    """

    def decorate(test: Any) -> Any:
        if isinstance(test, type):
            original = test.__dict__.get("setUpClass")

            @classmethod
            def setUpClass(cls) -> None:  # noqa: N802
                if condition():
                    raise unittest.SkipTest(reason)
                if original is not None:
                    original.__get__(None, cls)()
                else:
                    super(test, cls).setUpClass()

            test.setUpClass = setUpClass
            return test

        @functools.wraps(test)
        def run_unless_skipped(*args: Any, **kwargs: Any) -> Any:
            if condition():
                raise unittest.SkipTest(reason)
            return test(*args, **kwargs)

        return run_unless_skipped

    return decorate
