"""How npu is registered with Inductor, and what each kind of compile loads.

Registration goes through ``register_backend_for_device``/``register_device_op_overrides``
(and the device-module protocol as a fallback), once per process; the registered
Scheduling picks the backend per compile. ``import torch_npu`` and non-Inductor compiles
load nothing of ``torch_npu.compiler.inductor``; a cpu-only Inductor compile loads at most
the light registration part, never a backend.
"""
from __future__ import annotations

import random

import pytest
import torch
import torch_npu  # noqa: F401  (registers the npu device and the compile trigger)

from fresh_interpreter import run_python

BACKEND_MODULES = (
    "torch_npu.compiler.inductor.default_scheduling",
    "torch_npu.compiler.inductor.mlir",
    "torch_mlir",
)


def test_import_and_non_inductor_compiles_load_nothing_of_the_layer():
    code = """
        import sys
        import torch, torch_npu

        def layer():
            return sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.inductor"))

        assert layer() == [], layer()
        x = torch.randn(4, 4).npu()
        for backend in ("eager", "aot_eager"):
            out = torch.compile(lambda t: t.sin() + 1, backend=backend)(x)
            torch.testing.assert_close(out.cpu(), x.cpu().sin() + 1)
        assert layer() == [], layer()

        class M(torch.nn.Module):
            def forward(self, t):
                return t.cos() * 2

        torch.export.export(M(), (x,))
        assert layer() == [], layer()

        if "npu" in torch._dynamo.list_backends():
            torch.compile(lambda t: t * 3, backend="npu")(x)
            assert layer() == [], layer()
        print("ok")
    """
    assert run_python(code).strip() == "ok"


def test_cpu_only_inductor_compile_loads_no_backend_and_works():
    code = """
        import sys
        import torch, torch_npu
        f = torch.compile(lambda t: torch.softmax(t.sin() * 2 + 1, dim=-1).sum())
        x = torch.randn(8, 8)
        torch.testing.assert_close(f(x), torch.softmax(x.sin() * 2 + 1, dim=-1).sum())
        loaded = [m for m in sys.modules if m.startswith(%r)]
        assert loaded == [], loaded
        print("ok")
    """ % (BACKEND_MODULES,)
    assert run_python(code).strip() == "ok"


def test_registered_before_inductors_first_compile():
    # Importing Inductor's compile entry is what precedes every Inductor compile; the full
    # registration (with the npu config module) must be in place by then.
    code = """
        import torch, torch_npu
        import torch._inductor.compile_fx
        from torch._inductor.codegen import common
        from torch_npu.compiler.inductor import config as npu_config, registration
        assert registration.is_registered()
        assert common.get_custom_backend_config_for_device("npu") is npu_config
        print("ok")
    """
    assert run_python(code).strip() == "ok"


def test_npu_compiles_after_inductor_was_used_before_import_torch_npu():
    # Inductor's own device-module lookup is cached at its first compile; a cpu compile
    # before ``import torch_npu`` must not leave npu without codegen.
    code = """
        import torch
        x = torch.randn(8)
        torch.compile(lambda t: t.sin() + 1)(x)
        import torch_npu
        g = torch.compile(lambda t: torch.softmax(t.cos() * 2, dim=-1))
        torch.testing.assert_close(g(x.npu()).cpu(), torch.softmax(x.cos() * 2, dim=-1))
        print("ok")
    """
    assert run_python(code).strip() == "ok"


def test_the_device_module_offers_inductor_no_codegen():
    # One registration route: the setup step. Inductor's device-module route would register
    # npu without the config module and op overrides, so torch.npu does not answer it.
    from torch._inductor.codegen import common
    from torch_npu.compiler.inductor import config as npu_config, registration

    for name in ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"):
        assert not hasattr(torch.npu, name), name
    registration.setup()
    registration.setup()
    assert registration.is_registered()
    assert common.get_custom_backend_config_for_device("npu") is npu_config


def test_inductors_own_registration_pass_keeps_ours():
    from torch._inductor.codegen import common
    from torch_npu.compiler.inductor import registration

    registration.setup()
    common.init_backend_registration()
    assert registration.is_registered()


def test_a_registration_failure_raises_and_registers_nothing(monkeypatch):
    from torch._inductor.codegen import common
    from torch_npu.compiler.inductor import registration

    def broken():
        raise ImportError("simulated")

    saved = common.device_codegens.pop("npu")
    monkeypatch.setattr(registration, "_register", broken)
    try:
        with pytest.raises(ImportError, match="simulated"):
            registration.setup()
        assert common.get_scheduling_for_device("npu") is None
    finally:
        common.device_codegens["npu"] = saved
        monkeypatch.undo()
    registration.setup()
    assert registration.is_registered()


def test_cpp_wrapper_is_a_clear_error():
    f = torch.compile(lambda t: t.sin() + 2, options={"cpp_wrapper": True})
    with pytest.raises(Exception, match="cpp_wrapper=True .* not supported for npu"):
        f(torch.randn(4).npu())


def test_backend_chosen_per_compile_and_part_of_the_cache_key(monkeypatch):
    import counting_scheduling
    from torch_npu.compiler.inductor import backend_registry

    monkeypatch.setitem(
        backend_registry.BUILTIN_BACKENDS, "counting", "counting_scheduling:CountingScheduling"
    )

    # A constant of this run makes the graph new to the cache directory, which may be
    # shared with earlier runs.
    scale = 1.0 + random.random()

    def fn(t):
        return torch.tanh(t) * scale - t

    x = torch.randn(32)
    expected = fn(x)
    default = torch.compile(fn, options={"npu_backend": "default"})
    torch.testing.assert_close(default(x.npu()).cpu(), expected)
    before = counting_scheduling.scheduled_graphs

    # Same graph, other backend: must be compiled by that backend, not served from the
    # FX-graph cache entry of the default backend.
    counting = torch.compile(fn, options={"npu_backend": "counting"})
    torch.testing.assert_close(counting(x.npu()).cpu(), expected)
    assert counting_scheduling.scheduled_graphs == before + 1

    # Both compiled functions keep running their own code.
    torch.testing.assert_close(default(x.npu()).cpu(), expected)
    torch.testing.assert_close(counting(x.npu()).cpu(), expected)
    assert counting_scheduling.scheduled_graphs == before + 1
