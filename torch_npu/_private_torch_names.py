"""The private PyTorch names torch_npu depends on, one row per use, in one table.

A private name (a component of its dotted path below ``torch`` starts with ``_``:
``torch._C._x``, ``torch._dynamo...``, ``torch.utils._pytree``, ``torch.storage._StorageBase``)
carries no compatibility promise: any PyTorch release may move, rename or change it. Keeping
every such dependency in this table says, for each, why no public name serves and what stops
working when it moves, so a PyTorch upgrade starts from a list rather than from failures.

``test/compiler/test_private_torch_names.py`` resolves every name against the installed
torch and scans the sources for private names the table lacks; ``docs/private_torch_names.md``
is rendered from ``ROWS`` by ``render_markdown()``. A use is covered by a listed name when it
is that name or a public attribute of it (``torch._guards.TracingContext.try_get`` is covered
by ``torch._guards.TracingContext``). Names torch_npu adds to torch (the CUDA-only
``torch._C`` functions of ``transfer_to_npu``) are not dependencies and are not listed.
"""
from __future__ import annotations

from typing import NamedTuple


class Row(NamedTuple):
    names: tuple[str, ...]
    why: str
    breaks: str


ROWS: tuple[Row, ...] = (
    # --- runtime registration (import torch_npu)
    Row(("torch._C._get_privateuse1_backend_name", "torch._register_device_module"),
        "Check that the extension renamed PrivateUse1 to npu, and install torch.npu as the device module.",
        "import torch_npu fails: no torch.npu, no device-module lookups (autocast, AMP, torch.accelerator)."),
    Row(("torch.autograd.Variable._execution_engine",),
        "At exit, queue one backward per device on the engine directly (run_backward, no Python object in the task) and wait for it.",
        "The exit barrier raises in its atexit hook; a program exiting just after an npu backward can abort "
        "(\"terminate called without an active exception\")."),
    Row(("torch._tensor_classes",),
        "ForkingPickler registration covers the same tensor classes torch registers its own reducer for.",
        "_tensor_sharing.register() raises, so npu tensors cannot be shared through torch.multiprocessing."),
    Row(("torch.Tensor._make_wrapper_subclass",),
        "HiFloat8Tensor is a wrapper subclass whose storage is a uint8 tensor; there is no public constructor for wrappers.",
        "torch_npu.ops.hifloat8 tensors cannot be built."),
    Row(("torch._check_value",),
        "Argument checks of npu ops given a symbolic condition (under tracing) defer to torch's own check; plain bools are decided without it.",
        "Npu op argument checks raise AttributeError while traced with symbolic sizes."),
    Row(("torch._C.has_lapack",),
        "torch_npu.testing skips LAPACK-dependent tests on a build without it.",
        "The skip decorator raises; the tests using it error instead of skipping."),
    # --- npu device module
    Row(("torch.cuda.memory._augment_memory_snapshot_stack_traces",),
        "torch.npu.memory._snapshot(augment_with_fx_traces=True) reuses torch's FX stack-trace augmentation on our snapshot (same format).",
        "Snapshots requested with augment_with_fx_traces raise ImportError."),
    Row(("torch.utils._pytree", "torch.utils._pytree.arg_tree_leaves", "torch.utils._pytree.tree_flatten",
         "torch.utils._pytree.tree_leaves", "torch.utils._pytree.tree_unflatten", "torch.utils._pytree.tree_map"),
        "Flatten and rebuild nested inputs/outputs of make_graphed_callables and of the rng_prims patch kernels, "
        "map over HiFloat8Tensor arguments, and walk graph nodes' values for unbacked sizes; PyTorch 2.13 has no public pytree module.",
        "torch.npu.make_graphed_callables, the rng_prims_npu patch, hifloat8 dispatch and the graph trees' capture rules fail."),
    Row(("torch.ops.profiler._record_function_enter_new", "torch.ops.profiler._record_function_exit",
         "torch.ops.profiler._record_function_exit._RecordFunction"),
        "mstx range markers open and close a profiler record_function range through the same ops torch.autograd.profiler uses.",
        "torch.npu.mstx ranges fail or no longer appear in profiler traces."),
    Row(("torch._utils.classproperty", "torch.storage._LegacyStorage", "torch.storage._warn_typed_storage_removal"),
        "The legacy typed-storage classes of torch.npu (torch.npu.FloatStorage, ...) are built like torch.cuda's.",
        "Importing torch.npu.legacy_types fails, so the legacy storage names are missing."),
    # --- profiler
    Row(("torch._C._profiler._ExperimentalConfig",),
        "torch_npu.profiler's experimental config translates to torch's Kineto experimental config.",
        "Importing torch_npu.profiler fails."),
    Row(("torch._C._autograd._profiler_enabled",),
        "Dynamic profiling does not start a collection while another profiler session runs (Kineto keeps one per process).",
        "torch_npu.profiler.dynamic_profile cannot start."),
    Row(("torch.profiler._KinetoProfile",),
        "torch_npu.profiler._KinetoProfile (start/stop without schedule) is torch's class with Ascend's arguments.",
        "Importing torch_npu.profiler fails."),
    # --- ops
    Row(("torch._library.autograd", "torch._library.autograd.Info", "torch._library.autograd.make_autograd_impl",
         "torch._library.utils.lookup_op", "torch._ops.OpOverload"),
        "Op families build the autograd kernel of an npu op lazily, the way torch.library.register_autograd does, "
        "but for an op defined by the C++ library.",
        "Backward of the npu op families raises at the first call."),
    Row(("torch._inductor.decomposition", "torch._inductor.decomposition.decompositions",
         "torch._inductor.decomposition.register_decomposition", "torch._inductor.decomposition.fast_random_decomps"),
        "Register Inductor decompositions of npu ops (a listed registration) and drop the cached decomposition table.",
        "Inductor falls back to the npu kernels for those ops (slower, still correct) or registration raises."),
    Row(("torch.nn.modules.utils._pair",),
        "contrib modules normalise int-or-pair arguments exactly as torch.nn.Conv2d does.",
        "Importing the contrib roi_align, quant_conv2d and deform_conv modules fails."),
    Row(("torch.distributed.distributed_c10d._get_default_group", "torch.distributed.distributed_c10d._world"),
        "Find the HCCL process group of the default group, and look a group up by its hcom name for npu_mm_all_reduce_base.",
        "torch_npu.distributed helpers and npu_mm_all_reduce_base fail to find their process group."),
    Row(("torch._C._jit_pass_custom_pattern_based_rewrite_graph",),
        "The TorchScript fast_gelu fusion pass rewrites a graph pattern; there is no public pattern-rewrite API.",
        "torch_npu.jit fusion passes raise."),
    # --- compile shim: Dynamo
    Row(("torch._dynamo.device_interface.DeviceInterface", "torch._dynamo.device_interface.caching_worker_current_devices",
         "torch._dynamo.device_interface.caching_worker_device_properties",
         "torch._dynamo.device_interface.register_interface_for_device"),
        "Dynamo's device interface for npu (streams, events, properties in compile workers) is a DeviceInterface subclass "
        "registered for the device type; this is the extension point, and it is private.",
        "torch.compile on npu tensors cannot trace stream/event code nor compile in subprocess workers."),
    Row(("torch._dynamo.backends.registry", "torch._dynamo.backends.registry._COMPILER_FNS",
         "torch._dynamo.backends.registry._BACKENDS", "torch._dynamo.backends.registry.register_backend"),
        "Register the npu, npugraph_ex and npugraphs backends once, skipping names already registered or discovered as entry points.",
        "torch.compile(backend='npu' | 'npugraph_ex' | 'npugraphs') is unknown, or registration raises as a duplicate."),
    Row(("torch._dynamo.backends.common.aot_autograd", "torch._dynamo.backends.debugging.boxed_nop",
         "torch._functorch.aot_autograd.make_boxed_func", "torch._decomp.get_decompositions"),
        "Build the AOT-autograd backends (npu, npugraph_ex, npugraphs) from the same pieces Dynamo's own aot_eager uses.",
        "The npu, npugraph_ex and npugraphs backends cannot be built."),
    Row(("torch._dynamo.callback.callback_handler",),
        "The compile trigger retries a failed setup step at the start of the next compile.",
        "A setup step that failed once is never retried."),
    Row(("torch._dynamo.utils.common_constant_types",),
        "Dynamo treats torch.npu.NpuDeviceProperties as a constant, as it does for CUDA properties (a listed registration).",
        "Graphs that read device properties break on npu."),
    Row(("torch._dynamo.variables.torch.TorchInGraphFunctionVariable",
         "torch._dynamo.variables.torch.TorchInGraphFunctionVariable._get_handlers"),
        "Clear Dynamo's cached handler table so torch.npu.stream is handled when something was compiled before import torch_npu.",
        "After an early compile, torch.npu.stream in compiled code graph-breaks."),
    Row(("torch._dynamo.variables.torch", "torch._dynamo.variables.torch.constant_fold_functions"),
        "transfer_to_npu lets Dynamo fold the original autocast-state functions its replacements call.",
        "Compiled code calling the replaced torch autocast-state functions graph-breaks under transfer_to_npu."),
    Row(("torch._functorch._aot_autograd.utils.register_graphsafe_rng_device_type",),
        "Mark npu as a device with graph-safe RNG state for AOT autograd (a listed registration).",
        "Random ops in npu graphs use the non-graph-safe path; NPU graph capture of them fails."),
    Row(("torch._guards.TracingContext",),
        "The NPU graph wrapper reads which graph inputs are parameters/buffers from the AOT tracing context.",
        "npugraph_ex capture raises AttributeError: static inputs and user-output counts cannot be read."),
    Row(("torch._logging", "torch._logging.getArtifactLogger", "torch._logging._internal",
         "torch._logging._internal.log_registry", "torch._logging._internal.register_log",
         "torch._logging._internal.register_artifact"),
        "Register the npu log alias and its artifacts so TORCH_LOGS/torch._logging.set_logs control them, and log through them.",
        "import of the compile trigger fails; TORCH_LOGS=npu is unknown."),
    # --- the unavoidable patches (torch_npu._patches)
    Row(("torch._inductor.config", "torch._inductor.config._config", "torch._inductor.config._hash_dirty_var",
         "torch._inductor.config._mark_get_dict_dirty"),
        "Add the npu_backend config entry and change cudagraph_policy's default in Inductor's config table, "
        "invalidating its cached hash and dict (patches inductor_npu_backend_option, inductor_cudagraph_policy); "
        "public options are read through the module.",
        "The two patches fail; Inductor on npu cannot pick a codegen backend nor use NPU graph trees."),
    Row(("torch.utils._config_module.Config", "torch.utils._config_module._ConfigEntry",
         "torch.utils._config_module._UNSET_SENTINEL", "torch.utils._config_module.install_config_module"),
        "Build the added config entry like Inductor's own, tell an unset entry apart, and make torch_npu's compiler "
        "config a config module like torch's.",
        "The inductor_npu_backend_option patch and torch_npu.compiler.inductor.config fail."),
    Row(("torch._prims.rng_prims", "torch._prims.rng_prims.get_device", "torch._prims.rng_prims.run_and_save_rng_state",
         "torch._prims.rng_prims.run_with_rng_state", "torch._higher_order_ops.utils.registered_hop_fake_fns",
         "torch._C.DispatchKey"),
        "The rng_prims_npu patch replaces the device-picking kernels of the two RNG higher-order ops so npu is handled.",
        "Activation checkpointing/functionalized RNG with npu tensors fails in compiled code."),
    Row(("torch._subclasses.fake_tensor.FakeTensor",),
        "The fake kernel of npu::get_npu_format finds the real tensor a fake input stands for in its mode's converter "
        "records (fake_mode.fake_tensor_converter.meta_converter: tensor_memo, describer.lookup_tensor); a fake holds "
        "no backend metadata of the real tensor and no hook carries it.",
        "get_npu_format on a fake input answers ND (2) instead of the real tensor's format under torch.compile, "
        "export and FakeTensorMode."),
    Row(("torch.nn.attention.flex_attention._validate_device",),
        "The flex_attention_device patch replaces the module function flex_attention calls to check its inputs' "
        "device (a fixed set without npu; no registry).",
        "flex_attention on npu raises 'FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices'."),
    Row(("torch._higher_order_ops.flex_attention.flex_attention",
         "torch._higher_order_ops.flex_attention.flex_attention_backward", "torch._C._ExcludeDispatchKeyGuard"),
        "The flex attention higher-order ops get kernels on npu's autocast key (py_impl), which redispatch with "
        "that key excluded, as torch's cpu/cuda autocast kernels do.",
        "flex attention on npu inside torch.autocast('npu') raises 'could not find kernel ... AutocastPrivateUse1'."),
    Row(("torch._higher_order_ops.flex_attention.sdpa_dense", "torch._higher_order_ops.flex_attention.sdpa_dense_backward",
         "torch._dynamo.utils.detect_fake_mode", "torch.ops.aten._to_copy.default"),
        "npu's Inductor pass traces the flex ops' own dense implementations on the node's fake values (in their "
        "fake mode) and inlines the aten graph; dtype conversions in the score graphs become _to_copy, which vmap batches.",
        "torch.compile of flex attention on npu fails in Inductor's lowering (it picks the Triton template)."),
    # --- compile shim: Inductor
    Row(("torch._inductor.codegen.common", "torch._inductor.codegen.common.register_backend_for_device",
         "torch._inductor.codegen.common.register_device_op_overrides",
         "torch._inductor.codegen.common.get_scheduling_for_device",
         "torch._inductor.codegen.common.get_custom_backend_config_for_device",
         "torch._inductor.codegen.common.device_op_overrides_dict", "torch._inductor.codegen.common.DeviceOpOverrides"),
        "Inductor's device-backend extension point: register npu's scheduling, wrapper codegen and device op overrides.",
        "Inductor has no npu backend: torch.compile(backend='inductor') of npu code raises."),
    Row(("torch._inductor.codegen.cpp.CppScheduling", "torch._inductor.codegen.cpp_wrapper_cpu.CppWrapperCpu",
         "torch._inductor.codegen.wrapper.PythonWrapperCodegen", "torch._inductor.codegen.wrapper.SubgraphPythonWrapperCodegen",
         "torch._inductor.codegen.wrapper.WrapperLine", "torch._inductor.codegen.wrapper_fxir.WrapperFxCodegen",
         "torch._inductor.virtualized.V"),
        "npu's default Inductor backend subclasses the cpu scheduling and wrapper codegen classes (host memory runs cpu code); "
        "its wrapper overrides PythonWrapperCodegen's private _generate_kernel_call_helper and "
        "_generate_extern_kernel_alloc_helper (kernels launch through torch.npu._launch_host_kernel; cpu-layout "
        "convolutions call their fastcall entry point), and extends write_header (the module binds those entry points "
        "to global names).",
        "Importing torch_npu.compiler.inductor fails; if those helpers are renamed, the overrides are never called "
        "(kernels launch directly, convolutions go through torch.ops) and the wrapper tests fail; without write_header "
        "the generated code names unbound entry points and fails at its first call."),
    Row(("torch._inductor.codegen.cpp.OuterLoopFusedSchedulerNode", "torch._inductor.codegen.wrapper.pexpr",
         "torch._inductor.codegen.common.KernelArgs", "torch._inductor.scheduler.SchedulerNode",
         "torch._inductor.sizevars.SimplifyIndexing", "torch._inductor.utils.sympy_index_symbol",
         "torch._inductor.dependencies.MemoryDep"),
        "The mlir codegen backend and the outer-loop fusion rules read Inductor's scheduler nodes, kernel arguments and index expressions.",
        "The mlir backend and outer-loop rules fail to import or to generate code."),
    Row(("torch.utils._sympy.functions.BitwiseFn_bitwise_and", "torch.utils._sympy.functions.BitwiseFn_bitwise_or",
         "torch.utils._sympy.functions.BitwiseFn_bitwise_xor", "torch.utils._sympy.functions.CeilToInt",
         "torch.utils._sympy.functions.CleanDiv", "torch.utils._sympy.functions.FloatPow",
         "torch.utils._sympy.functions.FloatTrueDiv", "torch.utils._sympy.functions.FloorDiv",
         "torch.utils._sympy.functions.FloorToInt", "torch.utils._sympy.functions.Identity",
         "torch.utils._sympy.functions.IntTrueDiv", "torch.utils._sympy.functions.Max",
         "torch.utils._sympy.functions.Min", "torch.utils._sympy.functions.Mod",
         "torch.utils._sympy.functions.ModularIndexing", "torch.utils._sympy.functions.PowByNatural",
         "torch.utils._sympy.functions.PythonMod", "torch.utils._sympy.functions.RoundToInt",
         "torch.utils._sympy.functions.ToFloat", "torch.utils._sympy.functions.TruncToInt",
         "torch.utils._sympy.functions.Where"),
        "The mlir backend translates Inductor's sympy index functions; each one it knows is matched by class.",
        "Importing the mlir backend fails, or an index expression using a renamed function is not translated."),
    Row(("torch._inductor.custom_graph_pass.CustomGraphPass", "torch._inductor.utils.use_scatter_fallback",
         "torch._inductor.inductor_prims", "torch._prims_common.make_contiguous_strides_for"),
        "Host lowering choices are a post-grad custom pass (with a cache key) that picks scatter fallbacks and forces strides.",
        "The host lowering pass fails to import or to run."),
    Row(("torch._inductor.config.layout_optimization", "torch._inductor.config.force_layout_optimization",
         "torch._inductor.inductor_prims.force_stride_order"),
        "npu's post-grad pass gives npu convolutions the input layouts Inductor's lowering gives cpu ones (decided by "
        "the layout-optimization settings, forced with force_stride_order; conv_host_layout).",
        "The pass fails: compiled npu graphs with convolutions do not compile, or the pass is left out and npu "
        "convolutions convert their outputs to contiguous again."),
    Row(("torch._inductor.pattern_matcher.Match", "torch._inductor.pattern_matcher.PatternExpr",
         "torch._inductor.pattern_matcher.PatternMatcherPass", "torch._inductor.pattern_matcher.ReplaceFn",
         "torch._inductor.pattern_matcher.SearchFn", "torch._inductor.pattern_matcher.TraceFn",
         "torch._inductor.pattern_matcher._return_true", "torch._inductor.pattern_matcher.fwd_only",
         "torch._inductor.pattern_matcher.register_replacement"),
        "npugraph_ex pattern replacement registers patterns through Inductor's pattern matcher (same signature as register_replacement).",
        "torch.npu.npugraph_ex pattern registration fails."),
    Row(("torch._inductor.runtime.cache_dir_utils.cache_dir",),
        "The mlir JIT, and the notes kept beside FX-graph-cache entries (output stacks, capture facts), write under Inductor's cache directory.",
        "mlir kernels cannot be compiled; output stacks and capture facts are not kept for cache hits."),
    Row(("torch._inductor.cudagraph_utils.CUDAGraphPolicy",),
        "reduce-overhead on npu is an NPU graph policy plugged into Inductor's cudagraph_policy entry.",
        "mode='reduce-overhead' on npu does not use NPU graph trees."),
    Row(("torch._prims_common.is_non_overlapping_and_dense_or_false",),
        "Graph-tree placeholders keep an input's strides only when its layout is dense.",
        "Recording NPU graphs fails."),
    # --- transfer_to_npu (opt-in patch group)
    Row(("torch._C",),
        "transfer_to_npu adds the CUDA-only data-parallel functions to torch._C (checked absent first).",
        "transfer_to_npu cannot add them; nn.DataParallel(model.cuda()) fails under it."),
    Row(("torch._C.Generator",),
        "transfer_to_npu's torch.Generator replacement subclasses the C generator to map device='cuda' to npu.",
        "The generator patch fails."),
    Row(("torch._C.TensorBase",),
        "transfer_to_npu wraps the C Tensor.cuda method and is_cuda getter, keeping their docs.",
        "The tensor_cuda patch and the device mode fail."),
    Row(("torch._C._push_on_torch_function_stack", "torch._C._pop_torch_function_stack"),
        "transfer_to_npu's device mode enters and leaves the torch-function stack without the mode's context-manager machinery.",
        "The device mode of transfer_to_npu fails."),
    Row(("torch.storage._StorageBase",),
        "transfer_to_npu wraps storage .to(device='cuda').",
        "The storage_to patch fails."),
    Row(("torch.cuda.nvtx._nvtx",),
        "transfer_to_npu replaces torch.cuda.nvtx's binding object with npu markers.",
        "The nvtx patch fails."),
    Row(("torch.serialization._get_restore_location", "torch.serialization._package_registry"),
        "transfer_to_npu maps cuda locations in checkpoints to npu (map_location dicts, the location registry).",
        "torch.load of cuda checkpoints under transfer_to_npu fails or loads to cuda."),
    # --- torch_npu.testing
    Row(("torch.testing._internal.common_dtype._dispatch_dtypes", "torch.testing._internal.opinfo.core.OpInfo",
         "torch.testing._internal.opinfo.core.SampleInput"),
        "torch_npu.testing describes npu ops as OpInfos so torch's op test machinery can run them.",
        "torch_npu.testing.common_methods_invocations fails to import."),
    # --- utils
    Row(("torch.utils._python_dispatch.TorchDispatchMode",),
        "The FLOPs counter is a dispatch mode.",
        "torch_npu.utils.flops_count fails to import."),
)


def names() -> tuple[str, ...]:
    """Every listed name, in table order."""
    return tuple(name for row in ROWS for name in row.names)


def render_markdown() -> str:
    """The table as docs/private_torch_names.md."""
    lines = [
        "# Private PyTorch names torch_npu depends on",
        "",
        "Generated from `torch_npu/_private_torch_names.py` by `render_markdown()`; edit that module, not this file.",
        "",
        "| Name | Why we use it | What breaks if it moves |",
        "| --- | --- | --- |",
    ]
    for row in ROWS:
        shown = "<br>".join(f"`{name}`" for name in row.names)
        lines.append(f"| {shown} | {row.why} | {row.breaks} |")
    return "\n".join(lines) + "\n"
