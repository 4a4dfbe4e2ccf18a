"""Fused attention on npu against cpu SDPA's flash kernel: peak memory and speed.

Peak memory: torch_npu.npu_fusion_attention (BNSD) and F.scaled_dot_product_attention on npu
are measured with the npu allocator's peak statistics. cpu SDPA's flash kernel
(aten._scaled_dot_product_flash_attention_for_cpu) is measured two ways: run on npu tensors,
where the runtime executes that very CPU kernel with its allocations drawn from the npu
allocator (same allocator, same accounting), and on cpu tensors under torch.profiler's
memory events. Both count what the call allocates on top of its inputs; the inputs are the
same 3 x B*N*S*D tensors in every case. A materialised score matrix would be B*N*S*S floats.

Where the memory goes: the peaks are also read as requested bytes (before the allocator's
rounding), and npu_fusion_attention's peak is split into its outputs (attention_out and the
[B, N, S, 8] softmax_max/softmax_sum that the Ascend API returns) and the kernel's working
memory (per-thread blocks). The allocator rounds as CUDA's does (512-byte blocks; the 2 and
20 MiB segments are reserved, not allocated, bytes).

Speed: median wall time of alternating runs, npu fused ÷ cpu SDPA, forward and forward+backward.

    python bench/bench_attention.py [--seq 4096] [--runs 5] [--dtype float32] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

import torch_npu

NPU = torch.device("npu", 0)
MEMORY_BUDGET_RATIO = 1.2


def npu_peak(fn, requested: dict | None = None, name: str = "", outputs: dict | None = None) -> int:
    """Bytes allocated on npu by fn() on top of what was allocated before (its result kept).
    Also records the peak of requested (unrounded) bytes in `requested[name]` and the bytes of
    the result's tensors in `outputs[name]`."""
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    base_requested = torch.npu.memory_stats()["requested_bytes.all.current"]
    torch.npu.reset_peak_memory_stats()
    result = fn()
    torch.npu.synchronize()
    peak = torch.npu.max_memory_allocated() - base
    if requested is not None:
        requested[name] = torch.npu.memory_stats()["requested_bytes.all.peak"] - base_requested
    if outputs is not None:
        tensors = result if isinstance(result, (tuple, list)) else (result,)
        outputs[name] = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    del result
    return peak


def cpu_profiler_peak(fn) -> int:
    """Peak of the running sum of CPU allocation events recorded while fn() runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    events = []
    for e in prof.events():
        nbytes = e.cpu_memory_usage
        if nbytes:
            events.append((e.time_range.start, nbytes))
    events.sort()
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    del result
    return peak


def median_time(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    b, n, s, d = args.batch, args.heads, args.seq, args.dim
    g = torch.Generator().manual_seed(0)
    dtype = getattr(torch, args.dtype)
    q, k, v = (torch.randn(b, n, s, d, generator=g).to(dtype) for _ in range(3))
    qn, kn, vn = (t.to(NPU) for t in (q, k, v))
    scale = 1.0 / d ** 0.5

    fused = lambda: torch_npu.npu_fusion_attention(qn, kn, vn, n, "BNSD", scale=scale)  # noqa: E731
    sdpa_npu = lambda: F.scaled_dot_product_attention(qn, kn, vn)  # noqa: E731
    flash_on_npu_memory = lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qn, kn, vn)  # noqa: E731
    flash_cpu = lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)  # noqa: E731

    requested, outputs = {}, {}
    mem = {
        "npu_fusion_attention": npu_peak(fused, requested, "npu_fusion_attention", outputs),
        "sdpa_on_npu": npu_peak(sdpa_npu, requested, "sdpa_on_npu", outputs),
        "cpu_flash_same_allocator": npu_peak(flash_on_npu_memory, requested, "cpu_flash_same_allocator", outputs),
        "cpu_flash_profiler": cpu_profiler_peak(flash_cpu),
    }
    inputs = 3 * q.numel() * q.element_size()
    scores = b * n * s * s * 4
    reference = mem["cpu_flash_same_allocator"]
    ratio = mem["npu_fusion_attention"] / reference
    ratio_with_inputs = (mem["npu_fusion_attention"] + inputs) / (reference + inputs)

    # Speed, forward: alternate so both see the same load.
    fwd_fused, fwd_cpu = [], []
    for _ in range(args.runs):
        fwd_fused.append(median_time(fused, 1))
        fwd_cpu.append(median_time(lambda: F.scaled_dot_product_attention(q, k, v), 1))
    # Forward + backward.
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    qng, kng, vng = (t.clone().requires_grad_() for t in (qn, kn, vn))

    def fused_train():
        torch_npu.npu_fusion_attention(qng, kng, vng, n, "BNSD", scale=scale)[0].sum().backward()

    def cpu_train():
        F.scaled_dot_product_attention(qg, kg, vg).sum().backward()

    bwd_fused, bwd_cpu = [], []
    for _ in range(max(3, args.runs // 2)):
        bwd_fused.append(median_time(fused_train, 1))
        bwd_cpu.append(median_time(cpu_train, 1))

    summary = {
        "shape": [b, n, s, d],
        "dtype": args.dtype,
        "load_1min": os.getloadavg()[0],
        "threads": torch.get_num_threads(),
        "peak_bytes": mem,
        "peak_requested_bytes": requested,
        "output_bytes": outputs,
        "inputs_bytes": inputs,
        "score_matrix_bytes": scores,
        "memory_ratio_vs_cpu_flash": ratio,
        "memory_ratio_vs_cpu_flash_with_inputs": ratio_with_inputs,
        "memory_budget_ratio": MEMORY_BUDGET_RATIO,
        "forward_s": {"npu_fusion_attention": statistics.median(fwd_fused), "cpu_sdpa": statistics.median(fwd_cpu)},
        "forward_backward_s": {"npu_fusion_attention": statistics.median(bwd_fused),
                               "cpu_sdpa": statistics.median(bwd_cpu)},
    }
    summary["forward_speed_ratio"] = summary["forward_s"]["npu_fusion_attention"] / summary["forward_s"]["cpu_sdpa"]
    summary["forward_backward_speed_ratio"] = (summary["forward_backward_s"]["npu_fusion_attention"]
                                               / summary["forward_backward_s"]["cpu_sdpa"])
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        mib = lambda x: f"{x / 2**20:8.2f} MiB"  # noqa: E731
        print(f"attention B={b} N={n} S={s} D={d} {args.dtype}, {summary['threads']} threads, "
              f"load {summary['load_1min']:.1f}")
        print(f"  inputs q,k,v                      {mib(inputs)}   (score matrix would be {mib(scores)})")
        for name, nbytes in mem.items():
            extra = ""
            if name in requested:
                extra = (f"   requested {mib(requested[name])}, of which outputs {mib(outputs[name])}, "
                         f"working {mib(requested[name] - outputs[name])}")
            print(f"  peak over inputs {name:26s} {mib(nbytes)}{extra}")
        ok = "OK" if ratio <= MEMORY_BUDGET_RATIO else "OVER"
        print(f"  memory ratio npu_fusion_attention / cpu flash  {ratio:.3f} x  "
              f"(with inputs {ratio_with_inputs:.3f} x)   budget <= {MEMORY_BUDGET_RATIO} x  {ok}")
        print(f"  forward           npu {summary['forward_s']['npu_fusion_attention']*1e3:8.1f} ms   "
              f"cpu SDPA {summary['forward_s']['cpu_sdpa']*1e3:8.1f} ms   ratio {summary['forward_speed_ratio']:.2f} x")
        print(f"  forward+backward  npu {summary['forward_backward_s']['npu_fusion_attention']*1e3:8.1f} ms   "
              f"cpu SDPA {summary['forward_backward_s']['cpu_sdpa']*1e3:8.1f} ms   "
              f"ratio {summary['forward_backward_speed_ratio']:.2f} x")
    return 0 if ratio <= MEMORY_BUDGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
