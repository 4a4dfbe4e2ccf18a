"""Test generators of Ascend's operator tests: one test per dtype, format and operator.

``@Dtypes(torch.float16, torch.float32)`` and ``@Formats(0, 2, 29)`` mark a test method
taking ``(self, device, dtype, npu_format)``; ``@instantiate_tests`` on the class replaces
each marked method with one plain test per combination (``test_x_npu_float16_0``), run on
npu. ``@instantiate_ops_tests(op_db)`` does the same over an operator database: every
method taking ``op`` gets one test per operator, dtype and format of the database
(``OpInfo`` entries; their ``dtypesIfNPU`` and ``formats`` when they have them).
The generated names are ordinary unittest/pytest tests.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable

import torch

__all__ = ["Dtypes", "Formats", "feed_data", "instantiate_tests", "instantiate_ops_tests",
           "gen_op_input", "gen_ops_testcase"]

_DEFAULT_DEVICE = "npu"
# ND, the storage format every tensor has unless cast.
_DEFAULT_FORMAT = 2


def _check_values(what: str, values: tuple, kind: type | tuple[type, ...]) -> tuple:
    if not values:
        raise ValueError(f"{what} needs at least one value")
    for value in values:
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise TypeError(f"{what} takes {getattr(kind, '__name__', kind)} values, got {value!r}")
    return values


def Dtypes(*args) -> Callable:  # noqa: N802  (Ascend's name)
    """Mark a test method to run once per torch dtype given (``@instantiate_tests`` expands it)."""
    dtypes = _check_values("Dtypes", args, torch.dtype)

    def mark(func: Callable) -> Callable:
        func.dtypes = dtypes
        return func

    return mark


def Formats(*args) -> Callable:  # noqa: N802
    """Mark a test method to run once per npu storage format (ACL format id) given."""
    formats = _check_values("Formats", args, int)

    def mark(func: Callable) -> Callable:
        func.formats = formats
        return func

    return mark


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "") if dtype is not None else "none"


def feed_data(func, new_name, *args, **kwargs) -> Callable:
    """A test method named ``new_name`` that calls ``func(self, *args, **kwargs)``."""

    def test(self) -> Any:
        return func(self, *args, **kwargs)

    # A plain method of self only (no __wrapped__), so unittest and pytest call it bare.
    test.__name__ = test.__qualname__ = new_name
    test.__doc__ = func.__doc__
    test.__module__ = getattr(func, "__module__", test.__module__)
    return test


def _parameter_names(func: Callable) -> list[str]:
    return list(inspect.signature(func).parameters)[1:]


def _add_test(cls: type, name: str, test: Callable) -> None:
    if name in cls.__dict__:
        raise ValueError(f"{cls.__name__} already has a test named {name}")
    setattr(cls, name, test)


def _instantiate(cls: type, devices: tuple[str, ...]) -> type:
    for name, func in list(cls.__dict__.items()):
        if not name.startswith("test") or not callable(func):
            continue
        params = _parameter_names(func)
        if not params:
            continue
        dtypes = getattr(func, "dtypes", (None,))
        formats = getattr(func, "formats", (None,))
        for device in devices:
            for dtype in dtypes:
                for npu_format in formats:
                    values = {"device": device, "dtype": dtype if dtype is not None else torch.float32,
                              "npu_format": npu_format if npu_format is not None else _DEFAULT_FORMAT}
                    unknown = [p for p in params if p not in values]
                    if unknown:
                        raise TypeError(f"{cls.__name__}.{name}: instantiate_tests fills device, dtype and "
                                        f"npu_format; it cannot fill {unknown}")
                    parts = [name, device]
                    if dtype is not None:
                        parts.append(_dtype_name(dtype))
                    if npu_format is not None:
                        parts.append(str(npu_format))
                    kwargs = {p: values[p] for p in params}
                    _add_test(cls, "_".join(parts), feed_data(func, "_".join(parts), **kwargs))
        delattr(cls, name)
    return cls


def instantiate_tests(arg=None, **kwargs):
    """Class decorator (``@instantiate_tests`` or ``@instantiate_tests(device="npu")``):
    expand every test method with parameters into one test per device, dtype
    (``@Dtypes``) and format (``@Formats``)."""
    unknown = set(kwargs) - {"device"}
    if unknown:
        raise TypeError(f"instantiate_tests: unknown keyword(s) {sorted(unknown)}; accepted: device")
    device = kwargs.get("device", _DEFAULT_DEVICE)
    devices = (device,) if isinstance(device, str) else tuple(device)
    if isinstance(arg, type):
        return _instantiate(arg, devices)
    if arg is not None:
        raise TypeError(f"instantiate_tests decorates a class, got {arg!r}")
    return lambda cls: _instantiate(cls, devices)


def _op_dtypes(op_info: Any) -> list:
    dtypes = getattr(op_info, "dtypesIfNPU", None) or getattr(op_info, "dtypes", None) or (torch.float32,)
    return sorted(dtypes, key=str)


def _op_formats(op_info: Any) -> tuple:
    return tuple(getattr(op_info, "formats", None) or (_DEFAULT_FORMAT,))


def gen_op_input(testcase, func, op_info) -> Callable:
    """The test body of ``func`` for one operator: a callable taking ``(dtype, npu_format)``
    that calls ``func`` with the arguments it names among ``device`` (npu), ``dtype``,
    ``npu_format`` and ``op`` (``op_info``), as a method of ``testcase``."""
    params = _parameter_names(func)
    unknown = [p for p in params if p not in ("device", "dtype", "npu_format", "op")]
    if unknown:
        raise TypeError(f"{getattr(testcase, '__name__', testcase)}.{func.__name__}: operator tests are given "
                        f"device, dtype, npu_format and op; cannot fill {unknown}")

    def run(self, dtype, npu_format) -> Any:
        values = {"device": _DEFAULT_DEVICE, "dtype": dtype, "npu_format": npu_format, "op": op_info}
        return func(self, **{p: values[p] for p in params})

    return run


def gen_ops_testcase(cls, func, name, keys, value, op_info) -> None:
    """Add to ``cls`` the test ``name``: ``func`` run for ``op_info`` with the arguments
    ``dict(zip(keys, value))`` (``keys`` among ``dtype`` and ``npu_format``)."""
    arguments = dict(zip(keys, value))
    unknown = set(arguments) - {"dtype", "npu_format"}
    if unknown:
        raise TypeError(f"gen_ops_testcase: keys must be dtype and npu_format, got {sorted(unknown)}")
    body = gen_op_input(cls, func, op_info)
    _add_test(cls, name, feed_data(body, name, arguments.get("dtype"), arguments.get("npu_format", _DEFAULT_FORMAT)))


def instantiate_ops_tests(op_db) -> Callable:
    """Class decorator: every test method taking ``op`` becomes one test per operator of
    ``op_db``, dtype and format (``test_x_<op>_<dtype>_<format>``)."""
    ops: Iterable = list(op_db)

    def decorate(cls: type) -> type:
        for name, func in list(cls.__dict__.items()):
            if not name.startswith("test") or not callable(func) or "op" not in _parameter_names(func):
                continue
            for op_info in ops:
                op_name = op_info.name + (f"_{op_info.variant_test_name}" if getattr(op_info, "variant_test_name", "")
                                          else "")
                for dtype in _op_dtypes(op_info):
                    for npu_format in _op_formats(op_info):
                        test_name = f"{name}_{op_name.replace('.', '_')}_{_dtype_name(dtype)}_{npu_format}"
                        gen_ops_testcase(cls, func, test_name, ("dtype", "npu_format"), (dtype, npu_format), op_info)
            delattr(cls, name)
        return cls

    return decorate
