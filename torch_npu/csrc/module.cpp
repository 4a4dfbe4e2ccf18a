// Python bindings of the simulated NPU runtime (torch_npu._C). Importing the module
// registers the backend (hooks, allocator redirect); the device itself initialises on
// first use.
#include "npu_graph.h"

#include <torch/csrc/Generator.h>
#include <torch/extension.h>

namespace torch_npu {
void register_hooks();
}

namespace {

using namespace torch_npu;

void delete_storage_alias(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

py::dict stats_dict(const MemoryStats& s) {
  py::dict d;
  d["allocated_bytes"] = s.allocated_bytes;
  d["peak_allocated_bytes"] = s.peak_allocated_bytes;
  d["reserved_bytes"] = s.reserved_bytes;
  d["peak_reserved_bytes"] = s.peak_reserved_bytes;
  d["alloc_count"] = s.alloc_count;
  d["free_count"] = s.free_count;
  d["oom_count"] = s.oom_count;
  d["capacity_bytes"] = s.capacity_bytes;
  return d;
}

py::dict device_properties(int64_t index) {
  c10::DeviceIndex idx = resolve_device_index(index);
  py::dict d;
  d["name"] = "Simulated Ascend NPU";
  d["total_memory"] = memory_stats(idx).capacity_bytes;
  d["multi_processor_count"] = 8;
  d["major"] = 1;
  d["minor"] = 0;
  d["l2_cache_size"] = 32 << 20;
  return d;
}

// Runs a host kernel now, or records it while the current stream is being captured
// (replay then calls it with the very same argument tuple).
void launch_host_kernel(py::function fn, py::args args) {
  if (!is_recording()) {
    fn(*args);
    return;
  }
  record_python_call(fn.ptr(), args.ptr());
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Simulated NPU runtime registered as the PrivateUse1 backend";
  register_hooks();
  install_allocators();

  m.def("_init", &lazy_init);
  m.def("_is_initialized", &is_initialized);
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
    check_device_sync(resolve_device_index(i), "device synchronization (torch.npu.synchronize)");
  });
  m.def("_device_properties", &device_properties);
  m.def("_memory_stats", [](int64_t i) { return stats_dict(memory_stats(resolve_device_index(i))); });
  m.def("_reset_peak_memory_stats", [](int64_t i) { reset_peak_memory_stats(resolve_device_index(i)); });
  m.def("_empty_cache", &empty_cache);
  m.def("_mem_get_info", [](int64_t i) { return mem_get_info(resolve_device_index(i)); });
  m.def("_set_memory_capacity", [](int64_t i, int64_t n) { set_memory_capacity(resolve_device_index(i), n); });
  m.def("_get_default_generator", [](int64_t i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(resolve_device_index(i))));
  });
  m.def("_is_current_stream_capturing", []() { return active_capture() != nullptr; });
  m.def("_launch_host_kernel", &launch_host_kernel);
  // The graph trees' check, on every replay, that borrowed inputs sit where they were captured.
  m.def("_data_ptrs_equal", [](py::list args, const std::vector<int64_t>& indices, const std::vector<int64_t>& ptrs) {
    for (size_t k = 0; k < indices.size(); ++k) {
      PyObject* item = PyList_GET_ITEM(args.ptr(), indices[k]);
      if (!THPVariable_Check(item)) return false;
      if (reinterpret_cast<int64_t>(THPVariable_Unpack(item).data_ptr()) != ptrs[k]) return false;
    }
    return true;
  });
  m.def("_graph_pool_handle", &graph_pool_handle);
  // Graph trees hand out a replay's static outputs as tensors over a storage of their own
  // (sharing the graph's memory and keeping the graph's storage alive), so that one
  // handed-out tensor can be made to fail loudly once a later replay overwrites that
  // memory, without touching the graph's own storage. An alias of an alias keeps the
  // graph's storage alive, not the alias: a graph that borrows a handed-out tensor must not
  // keep it alive, nor fail when it is invalidated. Returns a byte tensor over the new storage.
  m.def("_alias_storage", [](const at::Tensor& t) {
    const c10::Storage& source = t.storage();
    const c10::DataPtr& source_ptr = source.data_ptr();
    auto* keep = source_ptr.get_deleter() == &delete_storage_alias
        ? new c10::Storage(*static_cast<c10::Storage*>(source_ptr.get_context()))
        : new c10::Storage(source);
    at::DataPtr ptr(keep->mutable_data(), keep, &delete_storage_alias, source.device());
    c10::Storage alias(c10::Storage::use_byte_size_t(), source.nbytes(), std::move(ptr), nullptr, false);
    return at::empty({0}, t.options().dtype(at::kByte))
        .set_(alias, 0, {static_cast<int64_t>(source.nbytes())}, {1});
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
      .def("capture_end", &NpuGraph::capture_end)
      .def("replay", &NpuGraph::replay)
      .def("reset", &NpuGraph::reset)
      .def("pool", &NpuGraph::pool)
      .def("num_nodes", &NpuGraph::num_nodes)
      .def("num_kernel_launches", &NpuGraph::num_kernel_launches);
}
