// Python bindings of the simulated NPU runtime (torch_npu._C). Importing the module
// registers the backend (hooks, allocator redirect); the device itself initialises on
// first use.
#include "torch_npu/csrc/aten/convolution.h"
#include "torch_npu/csrc/aten/deferred_registrations.h"
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/runtime/device_memory_file.h"
#include "torch_npu/csrc/graphs/npu_graph.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/device_model.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/host_allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/runtime/generator.h"
#include "torch_npu/csrc/observe/sync_debug.h"
#include "torch_npu/csrc/graphs/capture.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include <algorithm>
#include <map>
#include <limits>

namespace torch_npu {
void register_hooks();
void register_memory_history_bindings(py::module_& m);
namespace observe {
void bind_observers(py::module_& m);
}
void register_device_redirect(py::module& m);  // device_redirect.cpp (transfer_to_npu)
void register_cuda_as_npu(py::module& m);      // cuda_as_npu.cpp (transfer_to_npu)
void delete_storage_alias(void* ctx);                   // graph_replay.cpp
c10::Storage make_storage_alias(const c10::Storage& source);
void register_graph_replay_bindings(py::module_& m);
void add_device_guard_type(py::module_& m);  // device_guard_object.cpp
void add_op_stand_in_bindings(py::module_& m);  // op_stand_ins.cpp
namespace hccl {
void add_bindings(py::module_& m);  // hccl_bindings.cpp
}
}

namespace {

using namespace torch_npu;

py::dict stat_dict(const c10::CachingAllocator::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

py::dict stat_array_dict(const c10::CachingAllocator::StatArray& a) {
  py::dict d;
  d["all"] = stat_dict(a[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]);
  d["small_pool"] = stat_dict(a[static_cast<size_t>(c10::CachingAllocator::StatType::SMALL_POOL)]);
  d["large_pool"] = stat_dict(a[static_cast<size_t>(c10::CachingAllocator::StatType::LARGE_POOL)]);
  return d;
}

// The nested dictionary of torch.cuda.memory_stats_as_nested_dict(), key for key.
py::dict memory_stats_dict(int64_t index) {
  auto s = device_stats(resolve_device_index(index));
  py::dict d;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["max_split_size"] = s.max_split_size == std::numeric_limits<int64_t>::max() ||
                                s.max_split_size == static_cast<int64_t>(std::numeric_limits<size_t>::max())
                            ? int64_t(-1)
                            : s.max_split_size;
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["num_oom_rejections"] = s.num_oom_rejections;
  d["allocation"] = stat_array_dict(s.allocation);
  d["segment"] = stat_array_dict(s.segment);
  d["active"] = stat_array_dict(s.active);
  d["inactive_split"] = stat_array_dict(s.inactive_split);
  d["allocated_bytes"] = stat_array_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(s.reserved_bytes);
  d["active_bytes"] = stat_array_dict(s.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(s.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(s.requested_bytes);
  py::dict by_pool;
  for (const auto& entry : s.reserved_bytes_by_private_pools) {
    by_pool[py::make_tuple(static_cast<int64_t>(entry.first.first), static_cast<int64_t>(entry.first.second))] =
        stat_array_dict(entry.second);
  }
  d["reserved_bytes_by_private_pools"] = by_pool;
  return d;
}

py::dict duration_dict(const c10::CachingAllocator::DurationStat& s) {
  py::dict d;
  d["total"] = s.total;
  d["max"] = s.max;
  d["min"] = s.min;
  d["count"] = s.count;
  d["avg"] = s.count == 0 ? 0 : s.total / s.count;
  return d;
}

py::dict host_stats_dict() {
  HostStats s = host_memory_stats();
  py::dict d;
  d["allocations"] = stat_dict(s.allocations);
  d["allocated_bytes"] = stat_dict(s.allocated_bytes);
  d["active_requests"] = stat_dict(s.active_requests);
  d["active_bytes"] = stat_dict(s.active_bytes);
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  d["host_alloc_time"] = duration_dict(s.host_alloc_time);
  d["host_free_time"] = duration_dict(s.host_free_time);
  return d;
}

py::dict device_properties(int64_t index) {
  c10::DeviceIndex idx = resolve_device_index(index);
  const DeviceProfile& p = device_profile();
  py::dict d;
  d["name"] = p.name;
  d["total_memory"] = memory_capacity(idx);
  d["multi_processor_count"] = p.cube_core_num;
  d["major"] = p.major;
  d["minor"] = p.minor;
  d["l2_cache_size"] = p.l2_cache_size;
  d["cube_core_num"] = p.cube_core_num;
  d["vector_core_num"] = p.vector_core_num;
  d["arch"] = p.arch;
  d["bf16"] = p.bf16;
  return d;
}

py::list device_model_names() {
  py::list names;
  for (const auto& p : device_profiles()) names.append(p.name);
  return names;
}

py::list device_model_archs() {
  std::vector<std::string> archs{"simulated"};
  for (const auto& p : device_profiles()) {
    if (std::find(archs.begin(), archs.end(), p.arch) == archs.end()) archs.push_back(p.arch);
  }
  py::list out;
  for (const auto& a : archs) out.append(a);
  return out;
}

// The name of a compiled kernel, as the profiler and the sanitizer report it: the
// wrapper's name for it (`name=`), else the function's own.
std::string kernel_name(const py::function& fn, const py::kwargs& kwargs) {
  if (kwargs.contains("name")) return py::str(kwargs["name"]).cast<std::string>();
  py::object name = py::getattr(fn, "__name__", py::none());
  return name.is_none() ? std::string("npu_host_kernel") : name.cast<std::string>();
}

// What a compiled kernel touches: its npu tensor arguments, written where `writes`
// (argument positions, from the kernel's signature) says so; without it, every tensor
// argument counts as written.
std::vector<observe::TensorAccess> host_kernel_accesses(const py::args& args, const py::object& writes) {
  std::vector<observe::TensorAccess> accesses;
  std::vector<bool> written(args.size(), writes.is_none());
  if (!writes.is_none()) {
    for (auto w : writes) {
      auto i = w.cast<size_t>();
      if (i < written.size()) written[i] = true;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!THPVariable_Check(args[i].ptr())) continue;
    const at::Tensor& t = THPVariable_Unpack(args[i].ptr());
    observe::add_access(accesses, t, written[i], false, "arg" + std::to_string(i));
  }
  return accesses;
}

c10::DeviceIndex host_kernel_device(const py::args& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!THPVariable_Check(args[i].ptr())) continue;
    const at::Tensor& t = THPVariable_Unpack(args[i].ptr());
    if (t.device().type() == kNpu) return t.device().index();
  }
  return current_device();
}

// Runs a host kernel now, or records it while the current stream is being captured
// (replay then calls it with the very same argument tuple). Watched by the profiler or
// the sanitizer, the run (or each replay) is npu work named after the kernel.
void launch_host_kernel(py::function fn, py::args args, py::kwargs kwargs) {
  py::object writes = kwargs.contains("writes") ? py::object(kwargs["writes"]) : py::object(py::none());
  if (!is_recording()) {
    if (!observe::watching()) {
      fn(*args);
      return;
    }
    std::string name = kernel_name(fn, kwargs);
    // A CPU op of its own in profiler traces, with the kernel as its device activity.
    RECORD_FUNCTION(name, std::vector<c10::IValue>());
    observe::KernelLaunch launch(observe::WorkKind::Kernel, name);
    if (observe::watching(observe::kSanitizer)) launch.accesses() = host_kernel_accesses(args, writes);
    launch.start(current_stream(host_kernel_device(args)));
    fn(*args);
    return;
  }
  record_python_call(fn.ptr(), args.ptr(),
                     [name = kernel_name(fn, kwargs), device = host_kernel_device(args),
                      accesses = host_kernel_accesses(args, writes)](std::function<void()> call) {
                       return observe::replayed_node(name, device, accesses, std::move(call));
                     });
}

// `torch.npu._launch_host_kernel(fn, *args, name=..., writes=...)`, the entry point every
// compiled npu kernel goes through. A vectorcall C function rather than a pybind11
// binding: when nothing observes and nothing captures, which is every launch outside a
// profiler, a sanitizer or a graph capture, the kernel is called with the caller's own
// argument array (no tuple, no keyword dict, no argument conversion), so a launch costs
// little more than the direct call Inductor makes for a cpu kernel. Otherwise the
// arguments become a tuple and a dict and launch_host_kernel decides.
PyObject* launch_host_kernel_vectorcall(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs,
                                        PyObject* kwnames) {
  HANDLE_TH_ERRORS
  if (nargs < 1 || !PyCallable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError,
                    "_launch_host_kernel(fn, *args, name=None, writes=None): the first argument must be the "
                    "kernel to run (a callable)");
    return nullptr;
  }
  if (!observe::watching() && !is_recording()) {
    PyObject* result = PyObject_Vectorcall(args[0], args + 1, static_cast<size_t>(nargs - 1), nullptr);
    if (result == nullptr) return nullptr;
    Py_DECREF(result);
    Py_RETURN_NONE;
  }
  auto fn = py::reinterpret_borrow<py::function>(args[0]);
  auto positional = py::reinterpret_steal<py::args>(PyTuple_New(nargs - 1));
  for (Py_ssize_t i = 1; i < nargs; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(positional.ptr(), i - 1, args[i]);
  }
  py::kwargs keywords;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    keywords[py::handle(PyTuple_GET_ITEM(kwnames, i))] = py::handle(args[nargs + i]);
  }
  launch_host_kernel(fn, positional, keywords);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef launch_host_kernel_def = {
    "_launch_host_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&launch_host_kernel_vectorcall)),
    METH_FASTCALL | METH_KEYWORDS,
    "_launch_host_kernel(fn, *args, name=None, writes=None)\n--\n\nRuns host kernel fn(*args) on the current npu "
    "stream, or records it while that stream is being captured."};

bool unpack_int_sequence(PyObject* seq, c10::SmallVector<int64_t, 6>& out) {
  if (!PyTuple_Check(seq) && !PyList_Check(seq)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!THPUtils_checkLong(items[i])) return false;
    out[i] = THPUtils_unpackLong(items[i]);
  }
  return true;
}

// `torch.npu._empty_strided(size, stride, dtype, device_index)`: how compiled code allocates
// its npu buffers, as Inductor's `empty_strided_cpu`/`empty_strided_cuda` do for theirs. A
// fastcall C function: no argument parser and no dispatch, the tensor the npu
// `empty_strided` kernel makes (same allocator, capture pools, statistics).
PyObject* empty_strided_fastcall(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  c10::SmallVector<int64_t, 6> size, stride;
  if (nargs != 4 || !unpack_int_sequence(args[0], size) || !unpack_int_sequence(args[1], stride) ||
      !THPDtype_Check(args[2]) || !THPUtils_checkLong(args[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "_empty_strided(size, stride, dtype, device_index): size and stride are tuples of ints, dtype "
                    "a torch.dtype, device_index an int");
    return nullptr;
  }
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  const auto device = static_cast<c10::DeviceIndex>(THPUtils_unpackLong(args[3]));
  check_device_index(device, "tensor creation");
  const at::ScalarType dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  return THPVariable_Wrap(empty_strided_npu_tensor(size, stride, dtype, device));
  END_HANDLE_TH_ERRORS
}

PyMethodDef empty_strided_def = {
    "_empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&empty_strided_fastcall)),
    METH_FASTCALL,
    "_empty_strided(size, stride, dtype, device_index)\n--\n\nA new npu tensor of this geometry on npu "
    "device_index (uninitialised memory from its caching allocator)."};

// `torch.npu._convolution_host_layout(input, weight, bias, stride, padding, dilation,
// transposed, output_padding, groups)`: how compiled code calls `npu::_convolution_host_layout`,
// as Inductor's cpu code calls `torch.convolution`. A fastcall C function: no argument parser
// and no dispatch (compiled code runs outside autograd); the npu kernel itself.
PyObject* convolution_host_layout_fastcall(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  c10::SmallVector<int64_t, 6> stride, padding, dilation, output_padding;
  if (nargs != 9 || !THPVariable_Check(args[0]) || !THPVariable_Check(args[1]) ||
      (args[2] != Py_None && !THPVariable_Check(args[2])) || !unpack_int_sequence(args[3], stride) ||
      !unpack_int_sequence(args[4], padding) || !unpack_int_sequence(args[5], dilation) || !PyBool_Check(args[6]) ||
      !unpack_int_sequence(args[7], output_padding) || !THPUtils_checkLong(args[8])) {
    PyErr_SetString(PyExc_TypeError,
                    "_convolution_host_layout(input, weight, bias, stride, padding, dilation, transposed, "
                    "output_padding, groups): input and weight are npu tensors, bias an npu tensor or None, stride, "
                    "padding, dilation and output_padding lists of ints, transposed a bool, groups an int");
    return nullptr;
  }
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  // Everything read from Python objects is read before the GIL is released (an int-like
  // `groups` may run Python code when converted).
  const at::Tensor& input = THPVariable_Unpack(args[0]);
  const at::Tensor& weight = THPVariable_Unpack(args[1]);
  std::optional<at::Tensor> bias;
  if (args[2] != Py_None) bias = THPVariable_Unpack(args[2]);
  const bool transposed = args[6] == Py_True;
  const int64_t groups = THPUtils_unpackLong(args[8]);
  at::Tensor out;
  {
    pybind11::gil_scoped_release no_gil;
    out = npu_convolution_host_layout(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                                      groups);
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

PyMethodDef convolution_host_layout_def = {
    "_convolution_host_layout",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&convolution_host_layout_fastcall)), METH_FASTCALL,
    "_convolution_host_layout(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)"
    "\n--\n\nnpu::_convolution_host_layout without the dispatcher: the CPU kernel's convolution of npu tensors, "
    "its output in the layout that kernel writes."};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Simulated NPU runtime registered as the PrivateUse1 backend";
  register_hooks();
  install_allocators();
  init_tensor_sharing_bindings(m);
  register_device_redirect(m);
  register_cuda_as_npu(m);
  hccl::add_bindings(m);
  add_op_stand_in_bindings(m);

  m.def("_init", &lazy_init);
  m.def("_is_initialized", &is_initialized);
  m.def("_is_in_bad_fork", &in_bad_fork);
  // Calls served by each unboxed fast path since start-up (docs/runtime.md), by operator.
  m.def("_fast_path_counts", []() {
    std::map<std::string, int64_t> counts;
    for (const auto& [name, n] : fast_path_counts()) counts[name] += n;
    return counts;
  });
  m.def("_cpu_allocation_redirect_in_force", &cpu_allocation_redirect_in_force);
  m.def("_get_npu_format", [](const at::Tensor& t) { return npu_format_of(t); });
  m.def("_set_npu_format", [](const at::Tensor& t, int64_t format) { set_npu_format(t, format); });
  m.def("_device_count", []() { return static_cast<int64_t>(device_count()); });
  m.def("_get_device", []() { return static_cast<int64_t>(current_device()); });
  m.def("_set_device", [](int64_t i) {
    check_device_index(i, "set_device");
    set_current_device(static_cast<c10::DeviceIndex>(i));
  });
  m.def("_exchange_device", [](int64_t i) {
    int64_t old = current_device();
    if (i >= 0) {
      check_device_index(i, "device switch");
      set_current_device(static_cast<c10::DeviceIndex>(i));
    }
    return old;
  });
  m.def("_synchronize", [](int64_t i) {
    c10::DeviceIndex device = resolve_device_index(i);
    check_device_sync(device, "device synchronization (torch.npu.synchronize)");
    observe::on_device_synchronize(device);
  });
  m.def("_device_properties", &device_properties);
  m.def("_device_model_names", &device_model_names);
  m.def("_device_model_archs", &device_model_archs);
  m.def("_memory_stats", &memory_stats_dict);
  m.def("_memory_allocated", [](int64_t i) { return memory_allocated_bytes(resolve_device_index(i)); });
  m.def("_allocator_initialized", &allocator_initialized);
  m.def("_reset_peak_memory_stats", [](int64_t i) { reset_peak_memory_stats(resolve_device_index(i)); });
  m.def("_reset_accumulated_memory_stats", [](int64_t i) { reset_accumulated_memory_stats(resolve_device_index(i)); });
  m.def("_empty_cache", &empty_cache);
  m.def("_mem_get_info", [](int64_t i) { return mem_get_info(resolve_device_index(i)); });
  m.def("_set_memory_capacity", [](int64_t i, int64_t n) { set_memory_capacity(resolve_device_index(i), n); });
  m.def("_set_memory_fraction", [](double f, int64_t i) { set_memory_fraction(f, resolve_device_index(i)); });
  m.def("_get_memory_fraction", [](int64_t i) { return get_memory_fraction(resolve_device_index(i)); });
  m.def("_set_allocator_settings", &set_allocator_settings);
  m.def("_caching_allocator_raw_alloc", [](int64_t size, int64_t device, int64_t stream) {
    TORCH_CHECK(size >= 0, "caching_allocator_alloc: size must be non-negative, got ", size);
    return reinterpret_cast<uintptr_t>(raw_alloc(static_cast<size_t>(size), resolve_device_index(device), stream));
  });
  m.def("_caching_allocator_raw_delete", [](uintptr_t ptr) { raw_delete(reinterpret_cast<void*>(ptr)); });
  m.def("_new_pool_id", &new_pool_id);
  m.def("_retain_pool", &retain_pool);
  m.def("_release_pool", &release_pool);
  m.def("_pool_use_count", &pool_use_count);
  m.def("_exchange_thread_pool", [](int64_t pool, int64_t device) {
    return exchange_thread_pool_for_device(pool, device);
  });
  m.def("_host_memory_stats", &host_stats_dict);
  m.def("_host_empty_cache", &host_empty_cache);
  m.def("_reset_accumulated_host_memory_stats", &reset_accumulated_host_memory_stats);
  m.def("_reset_peak_host_memory_stats", &reset_peak_host_memory_stats);
  m.def("_set_sync_debug_mode", &set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &sync_debug_mode);
  register_memory_history_bindings(m);
  register_graph_replay_bindings(m);
  m.def("_get_default_generator", [](int64_t i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(resolve_device_index(i))));
  });
  m.def("_is_current_stream_capturing", []() { return active_capture() != nullptr; });
  m.add_object("_launch_host_kernel",
               py::reinterpret_steal<py::object>(PyCFunction_NewEx(&launch_host_kernel_def, nullptr, nullptr)));
  m.add_object("_empty_strided",
               py::reinterpret_steal<py::object>(PyCFunction_NewEx(&empty_strided_def, nullptr, nullptr)));
  m.add_object("_convolution_host_layout", py::reinterpret_steal<py::object>(
                                               PyCFunction_NewEx(&convolution_host_layout_def, nullptr, nullptr)));
  add_device_guard_type(m);
  m.def("_graph_pool_handle", &graph_pool_handle);
  // Graph trees hand out a replay's static outputs as tensors over a storage of their own
  // (sharing the graph's memory and keeping the graph's storage alive), so that one
  // handed-out tensor can be made to fail loudly once a later replay overwrites that
  // memory, without touching the graph's own storage. An alias of an alias keeps the
  // graph's storage alive, not the alias: a graph that borrows a handed-out tensor must not
  // keep it alive, nor fail when it is invalidated. Returns a byte tensor over the new storage.
  m.def("_alias_storage", [](const at::Tensor& t) {
    c10::Storage alias = make_storage_alias(t.storage());
    const auto nbytes = static_cast<int64_t>(alias.nbytes());
    return at::empty({0}, t.options().dtype(at::kByte)).set_(alias, 0, {nbytes}, {1});
  });
  m.def("_is_storage_alias", [](const at::Tensor& t) {
    return t.storage().data_ptr().get_deleter() == &delete_storage_alias;
  });
  // Any later access to the data of ``t``'s storage raises ``msg`` (CUDA builds of torch
  // have torch._C._set_storage_access_error_msg; CPU builds do not).
  m.def("_set_storage_access_error_msg", [](const at::Tensor& t, const std::string& msg) {
    t.storage().unsafeGetStorageImpl()->release_data_and_set_meta_custom_data_ptr_error_msg_(msg);
  });
  // The same for a storage known by its weak reference (``StorageWeakRef.cdata``, the
  // address of its StorageImpl), which the caller has checked is not expired.
  m.def("_set_storage_impl_access_error_msg", [](int64_t cdata, const std::string& msg) {
    reinterpret_cast<c10::StorageImpl*>(cdata)->release_data_and_set_meta_custom_data_ptr_error_msg_(msg);
  });
  observe::bind_observers(m);
  m.def("_event_elapsed_time", [](py::object start, py::object end) {
    auto a = start.attr("event_id").cast<uintptr_t>();
    auto b = end.attr("event_id").cast<uintptr_t>();
    TORCH_CHECK(a != 0 && b != 0, "elapsed_time needs both events to have been recorded first");
    return event_elapsed_ms(reinterpret_cast<void*>(a), reinterpret_cast<void*>(b));
  });

  // The graph's own calls manage the GIL: they wait for each other without holding it.
  py::class_<NpuGraph>(m, "_Graph")
      .def(py::init<>())
      .def("capture_begin", &NpuGraph::capture_begin, py::arg("pool") = 0,
           py::arg("capture_error_mode") = "global")
      .def("check_begin",
           [](NpuGraph& g, py::function callback) {
             // Released with the GIL held, whichever thread drops the last reference.
             std::shared_ptr<py::function> held(new py::function(std::move(callback)), [](py::function* f) {
               py::gil_scoped_acquire gil;
               delete f;
             });
             g.check_begin([held](const CaptureProblem& p) {
               py::gil_scoped_acquire gil;
               (*held)(p.kind, p.op, p.detail);
             });
           })
      .def("register_generator_state",
           [](NpuGraph& g, py::handle generator) {
             TORCH_CHECK_TYPE(THPGenerator_Check(generator.ptr()),
                              "register_generator_state expects a torch.Generator, got ",
                              Py_TYPE(generator.ptr())->tp_name);
             g.register_generator_state(reinterpret_cast<THPGenerator*>(generator.ptr())->cdata);
           })
      .def("capture_end", &NpuGraph::capture_end)
      .def("replay", &NpuGraph::replay)
      .def("reset", &NpuGraph::reset)
      .def("pool", &NpuGraph::pool)
      .def("num_nodes", &NpuGraph::num_nodes)
      .def("num_kernel_launches", &NpuGraph::num_kernel_launches);
}
