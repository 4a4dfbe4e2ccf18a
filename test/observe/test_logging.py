"""TORCH_LOGS names of torch_npu: known to ``import torch`` through autoload (whichever of
torch and torch_npu is imported first), silent at import, and each artifact logs what it
promises: setup steps, the Inductor backend choice and mlir fallbacks, NPU graph events."""
from __future__ import annotations

import pytest

from fresh_interpreter import run_python


def _run(code: str, torch_logs: str, **env: str) -> tuple[str, str]:
    # Logs go to stderr; the snippet prints a marker between the phases it tests.
    import os
    import subprocess
    import sys
    import textwrap

    from fresh_interpreter import REPO_ROOT

    child_env = {**os.environ, "TORCH_LOGS": torch_logs, **env}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO_ROOT, env=child_env,
        capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"child failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout, result.stderr


@pytest.mark.parametrize("first", ["torch", "torch_npu"])
def test_names_known_to_torch_logs_and_nothing_logged_at_import(first):
    out, err = _run(
        f"""
        import {first}
        import torch, torch_npu
        from torch._logging._internal import log_registry
        print(sorted(n for n in log_registry.artifact_names if n.startswith("npu")))
        print(log_registry.log_alias_to_log_qnames["npu"])
        """,
        "+npu,npu_setup,npu_inductor,npu_graphs",
    )
    assert out.splitlines() == ["['npu_graphs', 'npu_inductor', 'npu_setup']", "['torch_npu']"]
    assert err == ""


def test_npu_setup_logs_each_step_and_its_trigger():
    out, err = _run(
        """
        import torch, torch_npu
        import sys; print("imported", flush=True); sys.stderr.write("--imported--\\n"); sys.stderr.flush()
        import torch._dynamo
        """,
        "npu_setup",
    )
    before, after = err.split("--imported--\n")
    assert before == ""
    for step in ("inductor_option", "device_interface", "trace_rules", "stream_handlers", "graphsafe_rng", "backends"):
        assert f"setup step {step} ran in" in after, after
    assert "triggered by the first import of torch._dynamo" in after
    assert "triggered by the first import of torch._inductor.config" in after
    assert "s after import torch_npu" in after


def test_npu_inductor_logs_the_choice_and_its_source():
    def choice_lines(code, **env):
        _, err = _run(code, "npu_inductor", **env)
        lines = [line for line in err.splitlines() if "npu Inductor backend" in line]
        assert len(lines) == 1, err
        return lines[0]

    compile_with = """
        import torch, torch_npu
        x = torch.randn(8, device="npu")
        torch.compile(lambda x: torch.sin(x) * {scale} + 1, backend="inductor"{options})(x)
        """
    # options= over the environment: the config entry's override (the log cannot tell
    # options= from an assignment to torch._inductor.config, which make the same override).
    line = choice_lines(compile_with.format(scale=2, options=', options={"npu_backend": "default"}'),
                        TORCHINDUCTOR_NPU_BACKEND="mlir")
    assert "'default'" in line
    assert "set by torch.compile(options=...) or torch._inductor.config.npu_backend" in line, line
    line = choice_lines(compile_with.format(scale=3, options=""))
    assert "'default'" in line and "set by default" in line, line
    line = choice_lines(compile_with.format(scale=4, options=""), TORCHINDUCTOR_NPU_BACKEND="default")
    assert "set by environment TORCHINDUCTOR_NPU_BACKEND" in line, line


def test_npu_graphs_logs_records_replays_and_eager_fallbacks():
    _, err = _run(
        """
        import torch, torch_npu
        model = torch.nn.Linear(4, 4).npu()
        step = torch.compile(model, backend="npugraphs")
        x = torch.randn(2, 4, device="npu")
        with torch.no_grad():
            for _ in range(3):
                step(x)
        def host_sync(a):
            return a * a.sum().item()
        torch.compile(host_sync, backend="npugraphs")(torch.randn(3, device="npu"))
        torch.compile(host_sync, backend="npugraphs")(torch.randn(3, device="npu"))
        """,
        "npu_graphs",
    )
    assert "eager warm-up for a new input signature" in err
    assert "recorded NPU graph 1 of this input signature" in err
    assert ": replay" in err
    assert "runs eagerly: " in err


def test_autoload_off_module_name_works():
    out, err = _run(
        """
        import torch, torch_npu
        torch.compile(lambda x: x + 1, backend="npugraphs")(torch.ones(2, device="npu"))
        print("ok")
        """,
        "+torch_npu",
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert out.strip() == "ok"
    assert "setup step backends ran" in err


def test_registration_imports_nothing_of_the_compiler():
    out = run_python(
        """
        import sys, torch, torch_npu
        from torch._logging._internal import log_registry
        assert "npu_graphs" in log_registry.artifact_names
        print(sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor", "torch_npu.compiler"))))
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert out.strip() == "[]"
