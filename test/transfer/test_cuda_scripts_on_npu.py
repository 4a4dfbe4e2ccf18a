"""CUDA scripts as people write them (``cuda_scripts/``) run unmodified on npu and compute
what they compute on cpu.

Each script is run twice from its unmodified file: on npu with
``import torch_npu.contrib.transfer_to_npu`` first (``run_with_transfer_to_npu.py``), and
on cpu as a CPU-only machine runs it (no torch_npu: the script's own
``"cuda" if torch.cuda.is_available() else "cpu"`` picks cpu). Their printed results are
compared exactly where the same computation runs on both:

* ``mnist_train.py`` (training, NVTX ranges, checkpoint save and resume): equal to cpu.
* ``ddp_torchrun.py`` (torchrun, 2 processes on 127.0.0.1, nccl -> hccl on npu, gloo on
  cpu): equal to cpu on every rank.
* ``data_parallel.py``: on cpu DataParallel runs the module on the whole batch; on npu it
  splits every batch over the 2 devices and sums the replicas' gradients, as on CUDA. The
  npu run equals that computation done on cpu exactly (and the cpu run to float32 rounding).
* ``amp_custom_fwd.py``: npu autocast follows CUDA's casting policy and ``custom_fwd(device_type=
  "cuda")`` casts only on the accelerator, so a cpu run is a different computation; the npu
  run equals the same script ported by hand to ``torch.npu`` (every ``cuda`` written ``npu``)
  exactly, and cpu within float16 tolerance.

All runs start together (the whole set takes well under a minute on an idle 2-core machine),
each under a hard timeout.
"""
from __future__ import annotations

import copy
import json
import os
import runpy
import socket
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "cuda_scripts")
LAUNCHER = os.path.join(SCRIPTS, "run_with_transfer_to_npu.py")
REPO = os.path.dirname(os.path.dirname(HERE))
TIMEOUT_S = 240


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
            "--master_addr", "127.0.0.1", "--master_port", str(free_port()), *args]


def npu_env() -> dict:
    env = {**os.environ, "TORCH_NPU_MEMORY_CAPACITY_MB": "1024"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    return env


def cpu_env() -> dict:
    # A CPU-only machine: torch without torch_npu (no autoload), so CUDA is unavailable.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return env


def hand_port(source: str, destination: str) -> None:
    """``source`` written for npu by hand: every ``cuda`` becomes ``npu``, torch_npu imported."""
    with open(source) as f:
        text = f.read()
    with open(destination, "w") as f:
        f.write("import torch_npu  # noqa: F401\n" + text.replace("cuda", "npu"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cuda_scripts")
    ported = str(base / "amp_custom_fwd_npu.py")
    hand_port(script("amp_custom_fwd.py"), ported)
    out_dirs = {name: base / name for name in ("mnist_npu", "mnist_cpu", "ddp_npu", "ddp_cpu")}
    for path in out_dirs.values():
        path.mkdir()
    commands = {
        "mnist_npu": ([sys.executable, LAUNCHER, script("mnist_train.py"), "--out-dir", str(out_dirs["mnist_npu"])], npu_env()),
        "mnist_cpu": ([sys.executable, script("mnist_train.py"), "--out-dir", str(out_dirs["mnist_cpu"])], cpu_env()),
        "ddp_npu": (torchrun(LAUNCHER, script("ddp_torchrun.py"), "--out-dir", str(out_dirs["ddp_npu"])), npu_env()),
        "ddp_cpu": (torchrun(script("ddp_torchrun.py"), "--out-dir", str(out_dirs["ddp_cpu"])), cpu_env()),
        "dp_npu": ([sys.executable, LAUNCHER, script("data_parallel.py")], npu_env()),
        "dp_cpu": ([sys.executable, script("data_parallel.py")], cpu_env()),
        "amp_npu": ([sys.executable, LAUNCHER, script("amp_custom_fwd.py")], npu_env()),
        "amp_port": ([sys.executable, ported], npu_env()),
        "amp_cpu": ([sys.executable, script("amp_custom_fwd.py")], cpu_env()),
    }
    started = time.monotonic()
    processes = {
        name: subprocess.Popen(command, env=env, cwd=str(base), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
        for name, (command, env) in commands.items()
    }
    results, failures = {}, {}
    for name, process in processes.items():
        remaining = max(1.0, TIMEOUT_S - (time.monotonic() - started))
        try:
            stdout, stderr = process.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            stdout, stderr = process.communicate()
            failures[name] = f"timed out after {TIMEOUT_S} s\n{stderr[-3000:]}"
            continue
        if process.returncode != 0:
            failures[name] = f"exit {process.returncode}\n{stderr[-3000:]}"
            continue
        results[name] = json.loads(stdout.strip().splitlines()[-1])
    results["_elapsed_s"] = time.monotonic() - started
    results["_failures"] = failures
    return results


def result(runs, name):
    assert name in runs, runs["_failures"].get(name, "not run")
    return runs[name]


def test_the_whole_set_runs_within_the_ci_budget(runs):
    assert not runs["_failures"], runs["_failures"]
    print(f"cuda script set: {len(runs) - 2} runs in {runs['_elapsed_s']:.1f} s")


def test_mnist_training_checkpoint_and_resume_equal_cpu(runs):
    npu, cpu = result(runs, "mnist_npu"), result(runs, "mnist_cpu")
    assert npu["device"] == "npu:0" and cpu["device"] == "cpu"
    for key in ("losses", "evaluation", "resumed_losses", "parameters"):
        assert npu[key] == cpu[key], key
    # map_location="cuda:0" and lambda storage, loc: storage.cuda(0) both loaded onto npu.
    assert npu["loaded_devices"] == ["npu:0"] and npu["legacy_equal"]


def test_mnist_nvtx_ranges_are_in_the_profiler_trace(runs):
    npu = result(runs, "mnist_npu")
    with open(npu["trace"]) as f:
        names = [event.get("name") for event in json.load(f)["traceEvents"]]
    steps = len(npu["losses"])
    assert names.count("mstx::forward") == steps and names.count("mstx::backward") == steps
    assert {f"mstx::step {i}" for i in range(4)} <= set(names)


def test_ddp_torchrun_equals_cpu_on_every_rank(runs):
    npu, cpu = result(runs, "ddp_npu"), result(runs, "ddp_cpu")
    assert [r["backend"] for r in npu] == ["hccl", "hccl"] and [r["backend"] for r in cpu] == ["gloo", "gloo"]
    assert [r["parameter_device"] for r in npu] == ["npu:0", "npu:1"]
    # map_location={"cuda:0": f"cuda:{local_rank}"} put rank 0's checkpoint on each rank's device.
    assert [r["loaded_devices"] for r in npu] == [["npu:0"], ["npu:1"]]
    assert all(r["max_memory_allocated_positive"] for r in npu)
    for rank, (on_npu, on_cpu) in enumerate(zip(npu, cpu)):
        assert on_npu["losses"] == on_cpu["losses"], rank
        assert on_npu["parameters"] == on_cpu["parameters"], rank


def data_parallel_on_cpu(devices: int) -> dict:
    """data_parallel.py's training as DataParallel computes it on ``devices`` devices, on cpu.

    Every batch is chunked, each chunk runs on its own replica of the module, the outputs
    are concatenated, and each parameter's gradient is replica 0's plus the others' (in
    device order, as ``comm.reduce_add`` sums them).
    """
    namespace = runpy.run_path(script("data_parallel.py"), run_name="data_parallel")
    data, target = namespace["make_data"]()
    model = namespace["Model"](namespace["INPUT_SIZE"], namespace["OUTPUT_SIZE"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, outputs = [], []
    for start in range(0, namespace["DATA_SIZE"], namespace["BATCH_SIZE"]):
        x = data[start:start + namespace["BATCH_SIZE"]]
        y = target[start:start + namespace["BATCH_SIZE"]]
        optimizer.zero_grad()
        replicas = [copy.deepcopy(model) for _ in range(devices)]
        output = torch.cat([replica(chunk) for replica, chunk in zip(replicas, x.chunk(devices))])
        loss = F.mse_loss(output, y)
        loss.backward()
        for name, parameter in model.named_parameters():
            grads = [dict(replica.named_parameters())[name].grad for replica in replicas]
            total = grads[0] + grads[1]
            for other in grads[2:]:
                total.add_(other)
            parameter.grad = total
        optimizer.step()
        losses.append(loss.item())
        outputs.append(output.detach().tolist())
    return {"losses": losses, "outputs": outputs,
            "parameters": {k: v.flatten().tolist() for k, v in model.state_dict().items()}}


def test_data_parallel_splits_over_the_devices_as_on_cuda(runs):
    npu, cpu = result(runs, "dp_npu"), result(runs, "dp_cpu")
    assert npu["data_parallel"] and npu["device_count"] == 2 and npu["output_device"] == "npu:0"
    assert npu["chunk_sizes"] == [15, 15] * 3 and cpu["chunk_sizes"] == [30] * 3
    reference = data_parallel_on_cpu(npu["device_count"])
    for key in ("losses", "outputs", "parameters"):
        assert npu[key] == reference[key], key
    # The first step, before any update, is the same computation as cpu's whole-batch run.
    assert npu["losses"][0] == cpu["losses"][0] and npu["outputs"][0] == cpu["outputs"][0]
    torch.testing.assert_close(torch.tensor(npu["losses"]), torch.tensor(cpu["losses"]), rtol=1e-6, atol=1e-6)


def test_amp_and_custom_fwd_equal_the_hand_port_and_cast_on_npu(runs):
    npu, port, cpu = result(runs, "amp_npu"), result(runs, "amp_port"), result(runs, "amp_cpu")
    assert npu["device"] == "npu:0"
    for key in ("losses", "scales", "seen_dtypes", "output_dtype", "parameters"):
        assert npu[key] == port[key], key
    # custom_fwd(cast_inputs=...) cast the inputs and ran the forward with autocast off.
    assert npu["seen_dtypes"] == {"normalize": ["torch.float32", False],
                                  "linear": ["torch.float16", "torch.float16", False]}
    assert npu["output_dtype"] == "torch.float16"
    torch.testing.assert_close(torch.tensor(npu["losses"]), torch.tensor(cpu["losses"]), atol=2e-3, rtol=2e-3)
