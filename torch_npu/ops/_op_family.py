"""How one family of fused ``npu_*`` operators registers with PyTorch, in one consistent way.

An operator is an Ascend schema in the ``npu`` namespace with four registrations: the npu
kernel (a composite of ATen ops, run by the npu runtime), a fake kernel (shapes and dtypes
only, so Dynamo, AOT autograd and ``torch.export`` can trace it), autograd where Ascend has
a backward, and, for the pointwise and normalisation operators, a decomposition that
Inductor uses so that the operator fuses with its neighbours instead of being an opaque call.
The decomposition is the npu kernel itself: the eager result and the compiled result come
from the same formula.

``OpFamily`` holds the family's ``torch.library.Library("npu", "FRAGMENT")`` (the family
module keeps it alive) and collects the decompositions; Inductor receives them only when an
Inductor compile is about to start (``torch_npu.ops.register_inductor_decompositions``).

The schemas themselves are defined before the family is imported (the runtime library
defines every catalogued schema when it loads, with stand-in kernels that import the family
on first call; see ``torch_npu.ops``): ``define_schema`` then only records the schema, which
is what the catalog of schemas is built from, and ``OpFamily`` drops the family's stand-ins
before registering its kernels at the same keys.
"""
from __future__ import annotations

from typing import Callable

import torch

from torch_npu import _C

NAMESPACE = "npu"
DEVICE_KEY = "PrivateUse1"

# "name" or "name.overload" of the schemas the runtime library defined ahead of their family.
PREDEFINED: set[str] = {qualified for _, qualified in _C._npu_predefined_ops()}


class OpFamily:
    """The registrations of one operator family."""

    def __init__(self, module: str) -> None:
        """``module``: the family module's ``__name__`` (its stand-in kernels are dropped,
        however the module came to be imported)."""
        _C._npu_drop_op_stand_ins(module.rpartition(".")[2])
        self.library = torch.library.Library(NAMESPACE, "FRAGMENT")
        # "name" or "name.overload" -> the ATen composite Inductor decomposes the op into.
        self.decompositions: dict[str, Callable] = {}
        # The family's schemas, as written, in definition order.
        self.schemas: list[str] = []

    def define_schema(self, schema: str) -> None:
        """Define ``schema`` in the ``npu`` namespace unless it was defined ahead of the family."""
        self.schemas.append(schema)
        if schema.split("(", 1)[0].strip() not in PREDEFINED:
            self.library.define(schema)

    def define(
        self,
        schema: str,
        *,
        kernel: Callable,
        fake: Callable,
        backward: Callable | None = None,
        setup_context: Callable | None = None,
        decompose: bool = False,
        fake_needs_context: bool = False,
        kernel_keys: tuple[str, ...] = (DEVICE_KEY,),
    ) -> None:
        """Define ``schema`` with its npu kernel, fake kernel and (optionally) autograd.

        ``kernel_keys`` are the dispatch keys the kernel serves: the npu by default; an
        operator whose kernel also runs on cpu tensors (the attention operators, which run
        the runtime's host kernels) adds ``"CPU"``.

        The fake kernel is registered as the operator's Meta kernel, which FakeTensorMode
        runs for operators without a registered fake implementation: it costs a dispatcher
        entry, where ``torch.library.register_fake`` reads the caller's source file for its
        records (about 1 ms an operator at ``import torch_npu``). An operator whose fake kernel
        asks ``torch.library.get_ctx()`` for data-dependent sizes, or that must see the fake
        tensors themselves rather than meta copies of them (a format cast records the format
        in the fake output's backend metadata), needs the real fake registration:
        ``fake_needs_context=True``.
        """
        qualified = schema.split("(", 1)[0].strip()
        name, _, overload = qualified.partition(".")
        self.define_schema(schema)
        for key in kernel_keys:
            self.library.impl(qualified, kernel, key)
        target = f"{NAMESPACE}::{qualified}"
        if fake_needs_context:
            torch.library.register_fake(target, fake, lib=self.library)
        else:
            self.library.impl(qualified, fake, "Meta")
        if backward is not None:
            self._register_autograd(qualified, target, backward, setup_context)
        if decompose:
            self.decompositions[f"{name}.{overload or 'default'}"] = kernel

    def _register_autograd(self, qualified: str, target: str, backward: Callable, setup_context) -> None:
        """The Autograd kernel ``torch.library.register_autograd`` would register, built on the
        operator's first differentiable call instead of at registration.

        ``register_autograd`` builds its kernel at once (a dataclass and an autograd.Function
        per operator, about half a millisecond each); most operators are never called with
        autograd in a given process, so ``import torch_npu`` only registers a forwarding
        kernel. The kernel built on first use is the same one (``make_autograd_impl`` is what
        ``register_autograd`` calls), so behaviour does not change. Schemas are checked as
        ``register_autograd`` would check them by test/ascend/test_ops_registration.py.
        """
        built: list[Callable] = []

        def autograd_kernel(keyset, *args, **kwargs):
            if not built:
                from torch._library import autograd as library_autograd

                op = torch._library.utils.lookup_op(target)
                built.append(library_autograd.make_autograd_impl(op, library_autograd.Info(backward, setup_context)))
            return built[0](keyset, *args, **kwargs)

        self.library.impl(qualified, autograd_kernel, "Autograd", with_keyset=True)


def overload(qualified: str) -> torch._ops.OpOverload:
    """``"npu_rms_norm.default"`` -> ``torch.ops.npu.npu_rms_norm.default``."""
    name, overload_name = qualified.split(".")
    return getattr(getattr(getattr(torch.ops, NAMESPACE), name), overload_name)
