"""What each extern call of the compiled CNN and transformer block costs on npu over cpu.

Inductor's npu and cpu wrappers of ``bench_inductor_devices.py``'s small CNN and transformer
block call a convolution (cpu: ``extern_kernels.convolution``; npu: the entry point
``torch.npu._convolution_host_layout`` of the op npu's post-grad pass puts in its place),
``extern_kernels.addmm(..., out=)`` and ``aten._scaled_dot_product_flash_attention_for_cpu``
outside their fused kernels, allocate
their buffers and (npu) guard the graph's device. Each such call is timed here alone, with
the arguments and layouts of the generated code, npu and cpu in alternating blocks of one
process; the figure is the fastest block of each side (a block another process slowed down
only adds time), per call, and the npu result is checked bit-equal to cpu's (values and
strides): both convolutions take the bias and return the CPU kernel's channels-last output.

    python bench/bench_extern_ops.py [--blocks N] [--calls N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

import torch

import torch_npu  # noqa: F401  (registers the npu device)
from torch._inductor.select_algorithm import extern_kernels

reinterpret = torch._C._dynamo.guards._reinterpret_tensor
CONV = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1)
CONV_ARGS = ("stride", "padding", "dilation", "transposed", "output_padding", "groups")


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


def calls(device: str) -> dict[str, Callable[[], object]]:
    """The extern calls of the two compiled graphs on ``device``, by name."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(device)

    out: dict[str, Callable[[], object]] = {}
    x1, w1, b1 = _channels_last(rand(4, 3, 32, 32)), _channels_last(rand(8, 3, 3, 3)), rand(8)
    x2, w2, b2 = _channels_last(rand(4, 8, 16, 16)), _channels_last(rand(16, 8, 3, 3)), rand(16)
    cpu = device == "cpu"
    if cpu:
        out["cnn convolution 1"] = lambda: extern_kernels.convolution(x1, w1, b1, **CONV)
        out["cnn convolution 2"] = lambda: extern_kernels.convolution(x2, w2, b2, **CONV)
    else:
        conv = torch.npu._convolution_host_layout
        args = [list(CONV[k]) if isinstance(CONV[k], tuple) else CONV[k] for k in CONV_ARGS]
        out["cnn convolution 1"] = lambda: conv(x1, w1, b1, *args)
        out["cnn convolution 2"] = lambda: conv(x2, w2, b2, *args)
    for label, m, k, n in (("cnn addmm 4x16x10", 4, 16, 10), ("block addmm 64x64x192", 64, 64, 192),
                           ("block addmm 64x256x64", 64, 256, 64)):
        bias, a, w, o = rand(n), rand(m, k), rand(n, k), torch.empty(m, n, device=device)
        out[label] = (lambda bias, a, w, o, k, n: lambda: extern_kernels.addmm(
            bias, a, reinterpret(w, (k, n), (1, k), 0), alpha=1, beta=1, out=o))(bias, a, w, o, k, n)
    qkv = rand(64, 192)
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    out["block flash attention"] = lambda: flash(*(reinterpret(qkv, (2, 4, 32, 16), (6144, 16, 192, 1), offset)
                                                   for offset in (0, 64, 128)), 0.0, True)
    if cpu:
        empty = torch._C._dynamo.guards._empty_strided_cpu
        out["buffer allocation"] = lambda: empty((4, 3, 32, 32), (3072, 1, 96, 3), torch.float32)
        out["device guard"] = lambda: None
    else:
        out["buffer allocation"] = lambda: torch.npu._empty_strided((4, 3, 32, 32), (3072, 1, 96, 3), torch.float32, 0)

        def guard():
            with torch.npu._DeviceGuard(0):
                pass

        out["device guard"] = guard
    return out


def _block(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21, help="timed blocks per side")
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpu, npu = calls("cpu"), calls("npu")
    print(f"extern calls, npu vs cpu, fastest of {args.blocks} alternating blocks of {args.calls} calls, "
          f"1 thread, load {os.getloadavg()[0]:.1f}")
    for name in cpu:
        c, d = cpu[name](), npu[name]()
        if isinstance(c, tuple):
            c, d = c[0], d[0]
        if isinstance(c, torch.Tensor) and name.split()[1] in ("addmm", "flash", "convolution"):
            assert torch.equal(c, d.cpu()) and c.stride() == d.stride(), name
        for fn in (cpu[name], npu[name]):
            _block(fn, args.calls)
        times: dict[str, list[float]] = {"cpu": [], "npu": []}
        for i in range(args.blocks):
            for side in (("cpu", "npu") if i % 2 == 0 else ("npu", "cpu")):
                times[side].append(_block((cpu if side == "cpu" else npu)[name], args.calls))
        c_us, n_us = min(times["cpu"]) * 1e6, min(times["npu"]) * 1e6
        print(f"  {name:<24}cpu {c_us:8.2f}us  npu {n_us:8.2f}us  npu-cpu {n_us - c_us:+7.2f}us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
