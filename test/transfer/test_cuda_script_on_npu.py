"""An unmodified CUDA training script (cuda_training_script.py) runs on npu after
``import torch_npu.contrib.transfer_to_npu`` and computes what the same steps compute on cpu
(on the data the script drew on the device).

The script runs in its own interpreter, as a user would run it. Its float32 training equals
cpu exactly. Its AMP steps run npu autocast, which follows CUDA's casting policy, not the
cpu one (on cpu, softmax and log_softmax stay float16 under autocast): they equal the same
steps written for npu exactly, and cpu within float16 tolerance.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "cuda_training_script.py")
REPO = os.path.dirname(os.path.dirname(HERE))


def run_script(path: str, *args: str, env: dict | None = None, timeout: float = 600) -> dict:
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, path, *args], capture_output=True, text=True, timeout=timeout, env=child_env
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def reference(device: str, autocast_device: str) -> dict:
    """The script's computation written for ``device`` directly."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    # npu runs AdamW's multi-tensor (foreach) path, as CUDA would; so does this reference.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    # The script draws its data on the device, whose generator (CUDA's Philox, as on a
    # card) draws other numbers than cpu's under one seed: every reference computes on
    # the data the npu generator draws.
    generator = torch.Generator(device="npu")
    generator.manual_seed(1234)
    data = torch.randn(64, 8, generator=generator, device="npu").to(device)
    target = torch.randint(0, 4, (64,), generator=generator, device="npu").to(device)
    losses = []
    for _ in range(5):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scaler = torch.amp.GradScaler(autocast_device)
    amp_losses = []
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(autocast_device, dtype=torch.float16):
            amp_loss = F.cross_entropy(model(data), target)
        scaler.scale(amp_loss).backward()
        scaler.step(optimizer)
        scaler.update()
        amp_losses.append(amp_loss.item())
    side_sum = model(data).sum().item()
    model.eval()
    with torch.no_grad():
        output = model(data).cpu().tolist()
    return {
        "losses": losses,
        "amp_losses": amp_losses,
        "side_sum": side_sum,
        "graph_output": output,
        "compiled_output": output,
        "parameters": [p.detach().cpu().tolist() for p in model.parameters()],
    }


@pytest.fixture(scope="module")
def script_result():
    return run_script(SCRIPT)


def test_the_script_ran_on_npu_in_every_thread(script_result):
    assert script_result["parameter_device"] == "npu:0"
    assert script_result["thread"] == {"sum": 12.0, "device": "npu:0"}
    assert script_result["elapsed_ms_nonnegative"] and script_result["memory_allocated_positive"]


def test_float32_training_equals_cpu_exactly(script_result):
    cpu = reference("cpu", "cpu")
    assert script_result["losses"] == cpu["losses"]


def test_everything_equals_the_same_steps_written_for_npu(script_result):
    npu = reference("npu", "npu")
    for key in ("losses", "amp_losses", "side_sum", "parameters", "graph_output"):
        assert script_result[key] == npu[key], key
    torch.testing.assert_close(
        torch.tensor(script_result["compiled_output"]), torch.tensor(npu["compiled_output"]),
        atol=1e-5, rtol=1e-5,
    )


def test_amp_training_equals_cpu_within_float16_tolerance(script_result):
    cpu = reference("cpu", "cpu")
    torch.testing.assert_close(
        torch.tensor(script_result["amp_losses"]), torch.tensor(cpu["amp_losses"]), atol=2e-3, rtol=2e-3
    )
    for got, expected in zip(script_result["parameters"], cpu["parameters"]):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), atol=2e-3, rtol=2e-3)
