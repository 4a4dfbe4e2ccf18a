"""Compiled fused npu_* operators against their eager npu implementation, side by side.

The eager implementation of each fused operator is its composite of ATen ops run by the npu
runtime; under Inductor the operator decomposes into the same formula and fuses. For
``npu_rms_norm``, ``npu_swiglu`` and ``npu_rotary_mul`` on a 4096x4096 float32 input this
checks that the compiled function is exactly one kernel and times compiled against eager in
alternating blocks, reporting the median of the ratios of neighbouring blocks (budget
<= 0.5) with their quartiles. ``npu_rms_norm`` is timed twice: as LLM code calls it
(``[0]``, the normalised output) and returning ``rstd`` as well. Forward+backward of each
(``torch.autograd.grad``, compiled forward and backward against eager) is timed too,
without a budget. The machine's load average is printed with the figures.

All three are memory-bound on a host CPU, so the ratio is bounded below by the bytes moved:
compiled ``npu_swiglu`` reads the input once and writes the output once (with the write's
cache-line fill: 128 MiB here), where the eager ``silu(a) * b`` also writes and re-reads
``silu(a)`` (224 MiB): 0.57 by bytes alone. ``--bound`` measures what is left above that:
compiled swiglu against a compiled kernel moving the same bytes with no arithmetic (the
exp and division of silu, at the accuracy of cpu's kernels, are the rest), and cpu
Inductor against cpu eager on the same composite, i.e. what Inductor's C++ kernels reach
on this op on this machine.

    python bench/bench_fused_ops.py [--samples N] [--no-backward] [--bound] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Callable

import torch
from torch._inductor.utils import run_and_get_code

import torch_npu

BUDGET = 0.5
LAUNCH = "npu_launch_host_kernel("
N = 4096


def _cases() -> dict[str, tuple[Callable, tuple]]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, N, generator=gen).npu()
    gamma = torch.randn(N, generator=gen).npu()
    # BSND with B=1, S=4096, N=32, D=128: 4096x4096 elements; cos/sin broadcast over heads.
    q = torch.randn(1, N, 32, 128, generator=gen).npu()
    cos = torch.randn(1, N, 1, 128, generator=gen).npu()
    sin = torch.randn(1, N, 1, 128, generator=gen).npu()
    return {
        "npu_rms_norm[0]": (lambda x, g: torch_npu.npu_rms_norm(x, g)[0], (x, gamma)),
        "npu_rms_norm (y, rstd)": (lambda x, g: torch_npu.npu_rms_norm(x, g), (x, gamma)),
        "npu_swiglu": (lambda x: torch_npu.npu_swiglu(x), (x,)),
        "npu_rotary_mul": (lambda q, c, s: torch_npu.npu_rotary_mul(q, c, s), (q, cos, sin)),
    }


def _backward_cases() -> dict[str, tuple[Callable, tuple, int]]:
    """Forward and backward: (function, inputs, how many inputs take a gradient)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(N, N, generator=gen).npu().requires_grad_()
    gamma = torch.randn(N, generator=gen).npu().requires_grad_()
    q = torch.randn(1, N, 32, 128, generator=gen).npu().requires_grad_()
    cos = torch.randn(1, N, 1, 128, generator=gen).npu()
    sin = torch.randn(1, N, 1, 128, generator=gen).npu()
    return {
        "npu_rms_norm[0] fwd+bwd": (lambda x, g: torch_npu.npu_rms_norm(x, g)[0], (x, gamma), 2),
        "npu_swiglu fwd+bwd": (lambda x: torch_npu.npu_swiglu(x), (x,), 1),
        "npu_rotary_mul fwd+bwd": (lambda q, c, s: torch_npu.npu_rotary_mul(q, c, s), (q, cos, sin), 1),
    }


def _with_backward(fn: Callable, n_grad: int) -> Callable:
    grads: dict[tuple, torch.Tensor] = {}

    def step(*args):
        out = fn(*args)
        key = (tuple(out.shape), out.dtype, out.device)
        if key not in grads:
            grads[key] = torch.ones_like(out)
        return torch.autograd.grad(out, args[:n_grad], grads[key])

    return step


def _time(fn: Callable, args: tuple, calls: int = 3) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.npu.synchronize()
    return (time.perf_counter() - start) / calls


def _side_by_side(first: Callable, second: Callable, args: tuple, samples: int) -> dict[str, float]:
    """``second`` against ``first``: the median of the ratios of neighbouring blocks."""
    _time(first, args, 1)  # warm up the allocator's cache
    _time(second, args, 1)
    first_times, second_times = [], []
    for _ in range(samples):
        first_times.append(_time(first, args))
        second_times.append(_time(second, args))
    # Each block of ``second`` against the block of ``first`` timed just before it: the
    # load of a shared machine drifts between blocks, much less within one pair.
    ratios = sorted(b / a for b, a in zip(second_times, first_times))
    return {
        "eager_ms": statistics.median(first_times) * 1e3,
        "compiled_ms": statistics.median(second_times) * 1e3,
        "ratio": statistics.median(ratios),
        "ratio_quartiles": (ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]),
    }


def _compile_one_kernel(name: str, fn: Callable, args: tuple) -> tuple[Callable, int]:
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="inductor", fullgraph=True)
    _, code = run_and_get_code(compiled, *args)
    kernels = sum(c.count(LAUNCH) for c in code)
    assert kernels == 1, f"{name}: compiled to {kernels} kernels, expected 1"
    return compiled, kernels


def run(samples: int, backward: bool = True) -> dict[str, dict[str, float]]:
    results = {}
    for name, (fn, args) in _cases().items():
        compiled, kernels = _compile_one_kernel(name, fn, args)
        results[name] = {"kernels": kernels, **_side_by_side(fn, compiled, args, samples)}
    if backward:
        for name, (fn, args, n_grad) in _backward_cases().items():
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="inductor", fullgraph=True)
            eager_step, compiled_step = _with_backward(fn, n_grad), _with_backward(compiled, n_grad)
            results[name] = {"kernels": None, **_side_by_side(eager_step, compiled_step, args, samples)}
    return results


def swiglu_bound(samples: int) -> dict[str, dict[str, float]]:
    """What bounds compiled ``npu_swiglu`` against its eager composite.

    * compiled swiglu against a compiled kernel moving the same bytes with no arithmetic
      (the sum of the two halves): 1.0 means the swiglu kernel runs at the memory bound;
    * the same composite on cpu tensors, cpu Inductor against cpu eager: what Inductor's own
      C++ kernels reach on this op on this machine.
    """
    x = torch.randn(N, N, generator=torch.Generator().manual_seed(0))
    half = N // 2

    def swiglu(x):
        a, b = x.chunk(2, dim=-1)
        return torch.nn.functional.silu(a) * b

    def same_bytes(x):
        return x[:, :half] + x[:, half:]

    out = {}
    xn = x.npu()
    torch._dynamo.reset()
    compiled_swiglu = torch.compile(lambda x: torch_npu.npu_swiglu(x), backend="inductor", fullgraph=True)
    compiled_copy = torch.compile(same_bytes, backend="inductor", fullgraph=True)
    compiled_swiglu(xn), compiled_copy(xn)
    against_copy = _side_by_side(compiled_copy, compiled_swiglu, (xn,), samples)
    out["npu: compiled swiglu / compiled same-bytes kernel"] = against_copy
    # What the bytes and the arithmetic allow: memory time M scales with the bytes moved
    # (128 MiB compiled, 224 MiB eager), the arithmetic C (exp and division) is the same in
    # both, so compiled / eager >= (C + M) / (C + M * 224 / 128).
    memory = against_copy["eager_ms"]
    arithmetic = max(against_copy["compiled_ms"] - memory, 0.0)
    out["npu: bound (C + M) / (C + 1.75 M) from the two"] = {
        "eager_ms": arithmetic + memory * 224 / 128,
        "compiled_ms": arithmetic + memory,
        "ratio": (arithmetic + memory) / (arithmetic + memory * 224 / 128),
        "ratio_quartiles": (float("nan"), float("nan")),
    }
    torch._dynamo.reset()
    compiled_cpu = torch.compile(swiglu, backend="inductor", fullgraph=True)
    compiled_cpu(x)
    out["cpu: Inductor swiglu / eager swiglu"] = _side_by_side(swiglu, compiled_cpu, (x,), samples)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-backward", action="store_true", help="forward only")
    parser.add_argument("--bound", action="store_true", help="also measure what bounds npu_swiglu")
    options = parser.parse_args()
    load = os.getloadavg()
    results = run(options.samples, backward=not options.no_backward)
    bound = swiglu_bound(options.samples) if options.bound else {}
    load_after = os.getloadavg()
    if options.json:
        print(json.dumps({"load": load, "load_after": load_after, "results": results, "bound": bound}, indent=2))
        return
    print(f"compiled vs eager npu implementation, {N}x{N} float32, median of {options.samples} blocks, "
          f"{torch.get_num_threads()} threads, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"(after: {load_after[0]:.1f})")
    for name, r in results.items():
        kernels = f"{r['kernels']} kernel" if r["kernels"] else "        "
        verdict = "" if r["kernels"] is None else ("OK" if r["ratio"] <= BUDGET else "over budget")
        print(f"  {name:26s} {kernels}  eager {r['eager_ms']:7.1f} ms  compiled "
              f"{r['compiled_ms']:7.1f} ms  ratio {r['ratio']:.2f} [{r['ratio_quartiles'][0]:.2f}, "
              f"{r['ratio_quartiles'][1]:.2f}]  {verdict}")
    for name, r in bound.items():
        print(f"  {name:50s} {r['compiled_ms']:7.1f} ms / {r['eager_ms']:7.1f} ms  ratio {r['ratio']:.2f} "
              f"[{r['ratio_quartiles'][0]:.2f}, {r['ratio_quartiles'][1]:.2f}]")


if __name__ == "__main__":
    main()
