"""Import state and the compile trigger, each case in a fresh interpreter.

``import torch_npu`` must import no compiler module, initialize no device and leave torch's
public functions as they are; the first import of ``torch._dynamo`` (whoever does it, in
whatever order) sets the npu integration up once, without our Inductor layer.
"""
from __future__ import annotations

from textwrap import dedent

import pytest

NO_AUTOLOAD = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}

DYNAMO_STEPS = "('inductor_option', 'device_interface', 'trace_rules', 'stream_handlers', 'graphsafe_rng', 'rng_prims', 'backends', 'transfer_to_npu_tracing')"
# torch.onnx, torch.distributed.fsdp and torch.export import torch.nn.attention.flex_attention.
WITH_FLEX_STEPS = DYNAMO_STEPS[:-1] + ", 'flex_attention_device', 'flex_attention_autocast')"

# A fullgraph compile that needs the device interface and the stream trace rule.
STREAM_COMPILE = """
def _stream_fn(x, side):
    with torch.npu.stream(side):
        y = x * 2 + 1
    return y
_x = torch.randn(16)
_out = torch.compile(_stream_fn, backend="eager", fullgraph=True)(_x.npu(), torch.npu.Stream())
print("stream_compile", torch.equal(_out.cpu(), _x * 2 + 1))
"""

OUR_INDUCTOR_LAYER = """
def our_inductor_modules():
    return sorted(m for m in sys.modules if m.startswith(("torch_npu.compiler.inductor", "torch_npu.compiler.graph_trees")))
"""


def test_import_is_lazy_and_leaves_torch_functions_alone(python):
    out = python(
        """
        import sys, torch, torch.export, torch.onnx
        names = [("torch", "compile"), ("torch", "_TorchCompileWrapper"), ("torch.export", "export"),
                 ("torch.export", "export_for_training"), ("torch.export", "draft_export"),
                 ("torch.export", "load"), ("torch.export", "save"), ("torch.onnx", "export"),
                 ("torch.onnx", "dynamo_export")]
        before = {(m, n): getattr(sys.modules[m], n) for m, n in names if hasattr(sys.modules[m], n)}
        import torch_npu
        changed = [k for k, v in before.items() if getattr(sys.modules[k[0]], k[1]) is not v]
        loaded = [m for m in sys.modules
                  if m.startswith(("torch._dynamo", "torch._inductor", "triton", "torch_npu.compiler", "npugraph_ex"))]
        print(len(before) >= 6, changed, loaded, torch.npu.is_initialized())
        print(torch_npu._startup.compile_trigger.state())
        torch_npu.compiler.npugraph_mark_step_begin()
        print(torch_npu.compiler.npugraph_mark_step_begin is torch.npu.mark_step_begin,
              [m for m in sys.modules if m.startswith(("torch._dynamo", "torch_npu.compiler."))])
        """,
        env=NO_AUTOLOAD,
    ).splitlines()
    assert out[0] == "True [] [] False"
    assert "done=(), failed=()" in out[1] and "finder_installed=True" in out[1]
    assert out[2] == "True []"  # the step marker loads no compiler module


def test_list_backends_sets_up_without_our_inductor_layer_or_the_device(python):
    out = python(
        "import sys, torch, torch_npu\n"
        + OUR_INDUCTOR_LAYER
        + """
names = torch.compiler.list_backends()
print([n for n in ("npu", "npugraph_ex", "npugraphs") if n in names])
state = torch_npu._startup.compile_trigger.state()
print(state.done, state.failed, state.watching)
print(torch.npu.is_initialized(), our_inductor_modules(), "npugraph_ex" in sys.modules)
"""
    ).splitlines()
    assert out[0] == "['npu', 'npugraph_ex', 'npugraphs']"
    assert out[1] == f"{DYNAMO_STEPS} () ('torch._inductor.compile_fx', 'torch.nn.attention.flex_attention')"
    assert out[2] == "False [] False"


def test_dynamo_used_before_import_torch_npu(python):
    """Setup runs during ``import torch_npu``, and a stream handler table Dynamo built for
    an earlier compile is rebuilt so ``torch.npu.stream`` is handled."""
    out = python(
        dedent(
            """
            import torch, torch._dynamo
            torch.compile(lambda x: x.sin() + 1, backend="eager", fullgraph=True)(torch.ones(3))
            import torch_npu
            print(torch_npu._startup.compile_trigger.state().done)
            print(torch_npu._startup.compile_trigger.state().finder_installed)
            """
        )
        + STREAM_COMPILE,
        env=NO_AUTOLOAD,
    ).splitlines()
    assert out[0] == DYNAMO_STEPS
    assert out[1] == "True"  # still watching torch._inductor.compile_fx and flex attention's module
    assert out[2] == "stream_compile True"


@pytest.mark.parametrize("order", ["before", "after"])
def test_import_order_with_onnx_and_fsdp(python, order):
    imports = "import torch.onnx, torch.distributed.fsdp"
    first, second = (imports, "import torch_npu") if order == "before" else ("import torch_npu", imports)
    out = python(
        f"import sys, torch\n{first}\n{second}\n"
        + STREAM_COMPILE
        + "print(torch_npu._startup.compile_trigger.state().done, torch.npu.device_count() >= 1)\n",
        env=NO_AUTOLOAD,
    ).splitlines()
    assert out == ["stream_compile True", f"{WITH_FLEX_STEPS} True"]


def test_export_bound_before_import_torch_npu(python):
    out = python(
        """
        import torch
        from torch.export import export
        import torch_npu

        class M(torch.nn.Module):
            def forward(self, x):
                props = torch.npu.get_device_properties(torch.npu.current_device())
                with torch.npu.amp.autocast(dtype=torch.float16):
                    y = x @ x.t()
                return y + props.multi_processor_count

        x = torch.randn(4, 4)
        for strict in (True, False):
            ep = export(M(), (x.npu(),), strict=strict)
            expected = (x.half() @ x.half().t()) + torch.npu.get_device_properties(0).multi_processor_count
            print(strict, torch.allclose(ep.module()(x.npu()).cpu(), expected))
        print(torch_npu._startup.compile_trigger.state().done)
        import sys
        print(sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.inductor")))
        """,
        env=NO_AUTOLOAD,
    ).splitlines()
    assert out == ["True True", "False True", WITH_FLEX_STEPS, "[]"]


def test_eight_threads_first_compile_one_setup(python):
    out = python(
        """
        import threading, torch, torch_npu
        barrier = threading.Barrier(8)
        results = [None] * 8

        def work(i):
            x = torch.full((32,), float(i))
            barrier.wait()
            fn = torch.compile(lambda t: (t.sin() * 2 + i).relu(), backend="npu")
            results[i] = torch.allclose(fn(x.npu()).cpu(), (x.sin() * 2 + i).relu())

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        state = torch_npu._startup.compile_trigger.state()
        print(results, sorted(set(n for _, n in state.runs)), state.failed)
        """
    ).splitlines()
    assert out == ["[True, True, True, True, True, True, True, True] [1] ()"]
