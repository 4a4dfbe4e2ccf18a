"""Inductor on npu: the ``npu_backend`` choice and the codegen registered for device npu.

Nothing here is imported by ``import torch_npu`` or by non-Inductor compiles. The light
parts are ``backend_registry`` (valid ``npu_backend`` names, resolution) and
``registration`` (registers npu with Inductor); kernel generators are imported only once
chosen: ``default_scheduling`` (Inductor's C++ kernels on npu memory) and ``mlir``.
``reduce_overhead`` is the ``cudagraph_policy`` that replays npu graphs from the NPU graph
trees; npu's post-grad pass feeds it ``capture_facts`` and ``output_stack_traces``, kept
for cache hits by ``cache_side_notes``.
"""
