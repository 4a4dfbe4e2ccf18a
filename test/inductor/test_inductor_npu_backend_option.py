"""``npu_backend``: where its value comes from, how it is checked, what it loads.

Order: ``options`` (also spelled ``npu-backend``) > ``torch._inductor.config.npu_backend``
> ``TORCHINDUCTOR_NPU_BACKEND`` > ``"default"``. A wrong type fails at ``torch.compile``;
an unknown name fails, listing the valid names, before any backend module is imported.
"""
from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401  (registers the npu device and the compile trigger)

from fresh_interpreter import run_python


def test_option_is_a_known_inductor_config_key():
    import torch._inductor.config as inductor_config

    assert inductor_config.get_type("npu_backend") is str
    assert "npu_backend" in inductor_config.get_config_copy()
    # Part of the config Inductor saves into FX-graph cache keys.
    assert "npu_backend" in inductor_config.save_config_portable()


def test_resolution_order_options_over_config_over_env():
    code = """
        import os
        import torch, torch_npu
        import torch._inductor.config as c
        from torch_npu.compiler.inductor.backend_registry import requested_backend

        assert c.npu_backend == "from-env", c.npu_backend          # env over default
        c.npu_backend = "from-config"
        assert requested_backend() == "from-config"                 # user config over env
        with c.patch({"npu_backend": "from-options"}):              # what options= does
            assert requested_backend() == "from-options"
        assert requested_backend() == "from-config"
        assert os.environ["TORCHINDUCTOR_NPU_BACKEND"] == "from-env"
        print("ok")
    """
    assert run_python(code, env={"TORCHINDUCTOR_NPU_BACKEND": "from-env"}).strip() == "ok"


def test_default_without_env():
    code = """
        import os
        os.environ.pop("TORCHINDUCTOR_NPU_BACKEND", None)
        import torch, torch_npu
        import torch._inductor.config as c
        print(c.npu_backend)
    """
    assert run_python(code).strip() == "default"


@pytest.mark.parametrize("key", ["npu_backend", "npu-backend"])
def test_both_spellings_accepted_by_torch_compile(key):
    compiled = torch.compile(lambda t: t.cos() * 3, options={key: "default"})
    x = torch.arange(6.0)
    torch.testing.assert_close(compiled(x.npu()).cpu(), x.cos() * 3)


def test_wrong_type_fails_at_torch_compile_without_initializing():
    code = """
        import torch, torch_npu
        try:
            torch.compile(lambda x: x, options={"npu_backend": 3})
        except RuntimeError as exc:
            assert "npu_backend" in str(exc), exc
        else:
            raise AssertionError("no error")
        import sys
        assert not torch.npu.is_initialized()
        assert not any(m.startswith("torch_npu.compiler.inductor") for m in sys.modules)
        print("ok")
    """
    assert run_python(code).strip() == "ok"


def test_unknown_name_lists_valid_names_before_loading_any_backend():
    # The unknown name comes from the environment; options= then overrides it.
    code = """
        import os, sys
        import torch, torch_npu
        x = torch.arange(4.0, device="npu")
        env_before = dict(os.environ)
        f = torch.compile(lambda t: t.sin() + 1)
        try:
            f(x)
        except Exception as exc:
            msg = str(exc)
        else:
            raise AssertionError("no error")
        assert "no-such-backend" in msg and "valid values: default, mlir" in msg, msg
        loaded = [m for m in sys.modules if m.startswith(
            ("torch_npu.compiler.inductor.default_scheduling",
             "torch_npu.compiler.inductor.mlir", "torch_mlir"))]
        assert loaded == [], loaded
        assert dict(os.environ) == env_before

        g = torch.compile(lambda t: t.sin() + 1, options={"npu_backend": "default"})
        torch.testing.assert_close(g(x).cpu(), torch.arange(4.0).sin() + 1)
        print("ok")
    """
    out = run_python(code, env={"TORCHINDUCTOR_NPU_BACKEND": "no-such-backend"})
    assert out.strip() == "ok"


def test_env_value_that_torch_reads_as_bool_is_reported():
    from torch_npu.compiler.inductor.backend_registry import (
        UnknownNpuBackendError,
        validate_backend_name,
    )

    with pytest.raises(UnknownNpuBackendError, match="must be a string.*valid values: default, mlir"):
        validate_backend_name(True)


def test_default_backend_never_imports_torch_mlir():
    code = """
        import sys
        import torch, torch_npu
        f = torch.compile(lambda t: t.cos() * 3, options={"npu_backend": "default"})
        x = torch.arange(6.0).npu()
        torch.testing.assert_close(f(x).cpu(), torch.arange(6.0).cos() * 3)
        assert not any(m.startswith(("torch_mlir", "torch_npu.compiler.inductor.mlir"))
                       for m in sys.modules)
        print("ok")
    """
    assert run_python(code).strip() == "ok"
