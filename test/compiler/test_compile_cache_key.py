"""The compile caches never serve a graph built by other npu code.

AOT autograd applies the fused operators' decompositions before Inductor sees a graph, so
its cache (keyed on the graph before decomposition) would hand out kernels made from an old
decomposition after torch_npu changed, unless the npu codegen version in both cache keys
covers the decompositions' sources as well as the code generators'.
"""
import inspect
import os

import torch

import torch_npu  # noqa: F401  (registers the npu device)


def test_codegen_version_covers_every_decomposition_source():
    from torch_npu import ops
    from torch_npu.compiler.inductor import config as npu_config

    hashed = {os.path.realpath(p) for p in npu_config.codegen_source_files()}
    composites = []
    for family in ops.FAMILIES:
        module = __import__(f"torch_npu.ops.{family}", fromlist=["_"])
        composites += list(getattr(module, "INDUCTOR_DECOMPOSITIONS", {}).values())
    assert composites
    for composite in composites:
        assert os.path.realpath(inspect.getsourcefile(composite)) in hashed, composite
    assert os.path.realpath(npu_config.__file__) in hashed


def test_aot_autograd_cache_misses_when_the_codegen_version_changes(tmp_path, monkeypatch):
    from torch._dynamo.utils import counters
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    from torch_npu.compiler.inductor import config as npu_config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def step(x, w):
        return torch_npu.npu_rms_norm(x, w)[0].sum()

    x = torch.randn(4, 8, device="npu", requires_grad=True)
    w = torch.randn(8, device="npu", requires_grad=True)

    def compile_once(version):
        torch._dynamo.reset()
        counters.clear()
        with npu_config.patch(_codegen_version=version), functorch_config.patch(enable_autograd_cache=True), \
                inductor_config.patch(fx_graph_cache=True):
            torch.compile(step, backend="inductor")(x, w).backward()
        return counters["aot_autograd"]["autograd_cache_hit"], counters["aot_autograd"]["autograd_cache_miss"]

    assert compile_once("release A") == (0, 1)
    assert compile_once("release A") == (1, 0)  # the same npu code is served from the cache
    assert compile_once("release B") == (0, 1)  # other npu code compiles anew
    torch._dynamo.reset()
