"""Real models (torchvision CNNs, transformers GPT-2/BERT/Llama) on npu against cpu, in one run.

The models are the ones the real-model test matrix runs (``test/real_models/real_models.py``:
library code, tiny configs, random weights). Every figure is a ratio of two medians measured
side by side in this process, calls of the two sides interleaved so load changes hit both:

* ``eager``: npu eager ÷ cpu eager per step on the transformer models: inference (forward,
  no grad), forward+backward (loss and gradients, no optimizer) and a training step
  (forward, backward, SGD step), and forward+backward with the backward on the calling
  thread (``torch.autograd.set_multithreading_enabled(False)``), which leaves out the
  hand-offs to autograd's device thread that PyTorch's engine makes for npu as for CUDA and
  not for cpu. SGD is told ``foreach=False`` on both devices: left to
  its default it takes the multi-tensor path on npu (as on CUDA: torch picks it for
  accelerators) and the per-parameter loop on cpu, and the ratio would time two different
  optimizers (``--sgd-default`` shows that figure);
* ``inductor``: npu Inductor (``npu_backend="default"``) ÷ cpu Inductor per forward call,
  every model;
* ``first_compile``: first call of a freshly compiled GPT-2 forward, npu ÷ cpu, each in a
  fresh interpreter with an empty Inductor cache (median of the ratios of ``--compiles``
  pairs, cpu and npu alternating), in wall time and in CPU time (the process and the C++
  compiler runs it waited for; kernels are compiled in the process): a compile of minutes
  on a loaded 2-core machine shifts its wall time by more than npu could add, its CPU time
  much less;
* ``first_compile_train``: the same for a training step (forward, loss, backward: the
  backward graph is compiled at its first run), not in the default sections (minutes per pair);
* ``npugraphs``: ``backend="npugraphs"`` ÷ npu eager per step once graphs are recorded, on
  the CNNs, inference and training (each step opened with ``mark_step_begin()``).

Ratios below 1 mean npu is faster. One intra-op thread unless ``--threads`` says otherwise:
on a loaded machine, spinning OpenMP workers make steps of a few ms swing by several times
on either device, more than everything npu adds. The machine is shared: the load average is printed with
the results.

    python bench/bench_real_models.py [--repeat 15] [--compiles 3] [--threads 1] [--sgd-default]
        [--first-compile-backend inductor] [--only eager,inductor,...] [--json PATH]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
MODELS_DIR = os.path.join(REPO_ROOT, "test", "real_models")
# real_models.py, and the torchvision_schemas.py it imports from test/.
sys.path[:0] = [MODELS_DIR, os.path.join(REPO_ROOT, "test")]

import torch  # noqa: E402

import torch_npu  # noqa: E402
from real_models import MODELS, build_on_cpu  # noqa: E402

TRANSFORMERS = ("gpt2", "bert", "llama")
CNNS = ("resnet18", "mobilenet_v3_small")
NPU = torch.device("npu")


def _sync(device: torch.device) -> None:
    if device.type == "npu":
        torch.npu.synchronize()


def _interleaved(steps: dict, repeat: int, warmup: int = 3) -> dict:
    """Median seconds per call of each step function, calls of all of them interleaved."""
    for _ in range(warmup):
        for device, fn in steps.values():
            fn()
            _sync(device)
    samples: dict = {name: [] for name in steps}
    for _ in range(repeat):
        for name, (device, fn) in steps.items():
            start = time.perf_counter()
            fn()
            _sync(device)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def _inference_step(model_spec, module, device):
    args, _ = model_spec.inputs(torch.Generator().manual_seed(1))
    args = tuple(a.to(device) for a in args)

    def step():
        with torch.no_grad():
            model_spec.output(module(*args))

    return device, step


def _training_step(model_spec, module, params_of, device, mark_step=False, foreach=None, optimizer=True):
    args, target = model_spec.inputs(torch.Generator().manual_seed(1))
    args, target = tuple(a.to(device) for a in args), target.to(device)
    opt = torch.optim.SGD(params_of.parameters(), lr=1e-3, momentum=0.9, foreach=foreach)

    def step():
        if mark_step:
            torch_npu.npu.mark_step_begin()
        opt.zero_grad(set_to_none=True)
        loss = model_spec.loss(model_spec.output(module(*args)), target)
        loss.backward()
        if optimizer:
            opt.step()

    return device, step


def _on_calling_thread(device, step):
    def on_calling_thread():
        with torch.autograd.set_multithreading_enabled(False):
            step()

    return device, on_calling_thread


def _pair(name: str, train: bool):
    spec = MODELS[name]
    cpu_model = build_on_cpu(spec).train(train)
    return spec, cpu_model, copy.deepcopy(cpu_model).to(NPU)


def eager(repeat: int, sgd_foreach=False) -> dict:
    rows = {}
    for name in TRANSFORMERS:
        spec, cpu_model, npu_model = _pair(name, train=False)
        t = _interleaved({"cpu": _inference_step(spec, cpu_model, torch.device("cpu")),
                          "npu": _inference_step(spec, npu_model, NPU)}, repeat)
        spec, cpu_model, npu_model = _pair(name, train=True)
        b = _interleaved({"cpu": _training_step(spec, cpu_model, cpu_model, torch.device("cpu"), optimizer=False),
                          "npu": _training_step(spec, npu_model, npu_model, NPU, optimizer=False)}, repeat)
        # The same forward+backward with autograd's engine told to run the backward on the
        # calling thread, as it does for cpu tensors: without the two cross-thread wake-ups
        # of the engine's device thread, which PyTorch gives every accelerator (CUDA too).
        c = _interleaved({"cpu": _on_calling_thread(*_training_step(spec, cpu_model, cpu_model, torch.device("cpu"),
                                                                     optimizer=False)),
                          "npu": _on_calling_thread(*_training_step(spec, npu_model, npu_model, NPU, optimizer=False))},
                         repeat)
        s = _interleaved({"cpu": _training_step(spec, cpu_model, cpu_model, torch.device("cpu"), foreach=sgd_foreach),
                          "npu": _training_step(spec, npu_model, npu_model, NPU, foreach=sgd_foreach)}, repeat)
        rows[name] = {"inference_npu_over_cpu": t["npu"] / t["cpu"],
                      "fwd_bwd_npu_over_cpu": b["npu"] / b["cpu"],
                      "fwd_bwd_calling_thread_npu_over_cpu": c["npu"] / c["cpu"],
                      "training_npu_over_cpu": s["npu"] / s["cpu"],
                      "inference_cpu_ms": t["cpu"] * 1e3, "fwd_bwd_cpu_ms": b["cpu"] * 1e3,
                      "training_cpu_ms": s["cpu"] * 1e3}
    return rows


def inductor(repeat: int) -> dict:
    rows = {}
    for name in CNNS + TRANSFORMERS:
        torch._dynamo.reset()
        spec, cpu_model, npu_model = _pair(name, train=False)
        options = {"npu_backend": "default"}
        t = _interleaved({"cpu": _inference_step(spec, torch.compile(cpu_model, options=options), torch.device("cpu")),
                          "npu": _inference_step(spec, torch.compile(npu_model, options=options), NPU)}, repeat)
        rows[name] = {"npu_over_cpu": t["npu"] / t["cpu"], "cpu_ms": t["cpu"] * 1e3}
    return rows


FIRST_COMPILE_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    sys.path[:0] = sys.argv[4:]
    import torch
    import torch_npu  # noqa: F401
    from real_models import MODELS, build_on_cpu
    spec = MODELS["gpt2"]
    device, train, backend = torch.device(sys.argv[1]), sys.argv[2] == "train", sys.argv[3]
    model = build_on_cpu(spec).train(train).to(device)
    inputs, target = spec.inputs(torch.Generator().manual_seed(1))
    args, target = tuple(a.to(device) for a in inputs), target.to(device)
    if backend == "inductor":
        compiled = torch.compile(model, options={"npu_backend": "default"})
    else:
        compiled = torch.compile(model, backend=backend)

    def cpu_s():  # this process's threads and its finished children (the C++ compiler runs)
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    start, start_cpu = time.perf_counter(), cpu_s()
    if train:  # forward, then the backward Inductor compiles at its first run
        spec.loss(spec.output(compiled(*args)), target).backward()
    else:
        with torch.no_grad():
            compiled(*args)
    if device.type == "npu":
        torch.npu.synchronize()
    print(time.perf_counter() - start, cpu_s() - start_cpu)
    """
)


def _first_compile_s(device: str, kind: str, backend: str) -> tuple[float, float]:
    """Wall and CPU seconds of one cold first call. The kernels are compiled in the calling
    process (one compile thread), so its CPU time, with the C++ compiler runs it waited for,
    is the whole work: unlike wall time, other processes' load barely changes it."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix=f"bench_real_models_{device}_"),
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", FIRST_COMPILE_CHILD, device, kind, backend, MODELS_DIR,
                          os.path.join(REPO_ROOT, "test")], env=env, check=True,
                         capture_output=True, text=True)
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _first_compile_pairs(compiles: int, kind: str, backend: str) -> dict:
    wall = {"cpu": [], "npu": []}
    cpu_time = {"cpu": [], "npu": []}
    for _ in range(compiles):  # pairs, so a load change hits both devices
        for device in ("cpu", "npu"):
            w, c = _first_compile_s(device, kind, backend)
            wall[device].append(w)
            cpu_time[device].append(c)
    ratios = [n / c for n, c in zip(wall["npu"], wall["cpu"])]
    cpu_ratios = [n / c for n, c in zip(cpu_time["npu"], cpu_time["cpu"])]
    return {"gpt2": {"npu_over_cpu_cold": statistics.median(ratios),
                     "npu_over_cpu_cold_cpu_time": statistics.median(cpu_ratios),
                     "cpu_cold_s": statistics.median(wall["cpu"]), "npu_cold_s": statistics.median(wall["npu"]),
                     "cpu_cold_cpu_s": statistics.median(cpu_time["cpu"]),
                     "npu_cold_cpu_s": statistics.median(cpu_time["npu"])}}


def first_compile(compiles: int, backend: str) -> dict:
    return _first_compile_pairs(compiles, "infer", backend)


def first_compile_train(compiles: int, backend: str) -> dict:
    return _first_compile_pairs(compiles, "train", backend)


def npugraphs(repeat: int) -> dict:
    from torch_npu.compiler import graph_trees

    rows = {}
    for name in CNNS:
        row = {}
        for train in (False, True):
            torch._dynamo.reset()
            graph_trees.reset()
            spec, _, eager_model = _pair(name, train=train)
            graph_model = copy.deepcopy(eager_model)
            compiled = torch.compile(graph_model, backend="npugraphs")
            if train:
                steps = {"eager": _training_step(spec, eager_model, eager_model, NPU, mark_step=True),
                         "npugraphs": _training_step(spec, compiled, graph_model, NPU, mark_step=True)}
            else:
                steps = {"eager": _inference_step(spec, eager_model, NPU),
                         "npugraphs": _inference_step(spec, compiled, NPU)}
            t = _interleaved(steps, repeat)
            stats = dict(graph_trees.get_manager(0, create_if_none_exists=False).stats)
            if stats["replays"] == 0 or stats["eager_runs"]:
                raise RuntimeError(f"{name}: npugraphs did not replay every step: {stats}")
            mode = "training" if train else "inference"
            row[f"{mode}_npugraphs_over_eager"] = t["npugraphs"] / t["eager"]
            row[f"{mode}_eager_ms"] = t["eager"] * 1e3
        rows[name] = row
    return rows


SECTIONS = {"eager": eager, "inductor": inductor, "first_compile": first_compile,
            "first_compile_train": first_compile_train, "npugraphs": npugraphs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--compiles", type=int, default=3)
    parser.add_argument("--only", default=",".join(s for s in SECTIONS if s != "first_compile_train"), help="comma-separated sections to run")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--first-compile-backend", default="inductor",
                        help="torch.compile backend of the first_compile sections (the figures are Inductor's; "
                             "aot_eager runs the same steps in seconds)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (torch.set_num_threads)")
    parser.add_argument("--sgd-default", action="store_true",
                        help="eager training step: leave SGD's foreach to its per-device default")
    args = parser.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench_real_models_"))
    torch.set_num_threads(args.threads)

    load_before = os.getloadavg()
    results: dict = {}
    for section in args.only.split(","):
        fn = SECTIONS[section]
        if section.startswith("first_compile"):
            results[section] = fn(args.compiles, args.first_compile_backend)
        elif section == "eager":
            results[section] = fn(args.repeat, sgd_foreach=None if args.sgd_default else False)
        else:
            results[section] = fn(args.repeat)
    results["load_average"] = {"before": load_before, "after": os.getloadavg(), "cores": os.cpu_count(),
                               "threads": torch.get_num_threads()}
    for section, rows in results.items():
        print(f"== {section}")
        if section == "load_average":
            print(f"  1-min load before {rows['before'][0]:.1f}, after {rows['after'][0]:.1f} on {rows['cores']} cores, "
                  f"{rows['threads']} intra-op thread(s)")
            continue
        for name, row in rows.items():
            print(f"  {name}: " + ", ".join(f"{k}={v:.3g}" for k, v in row.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
