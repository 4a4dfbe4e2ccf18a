// Python bindings of the simulated NPU runtime (torch_npu._C). Importing the module
// registers the backend (hooks, allocator redirect); the device itself initialises on
// first use.
#include "npu_runtime.h"

#include <torch/csrc/Generator.h>
#include <torch/extension.h>

namespace torch_npu {
void register_hooks();
namespace hccl {
void add_bindings(py::module_& m);  // hccl_bindings.cpp
}
}

namespace {

using namespace torch_npu;

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

void launch_host_kernel(py::function fn, py::args args) {
  if (active_capture() == nullptr) {
    fn(*args);
    return;
  }
  auto held = std::make_shared<std::pair<py::function, py::args>>(fn, args);
  record_host_call([held]() {
    py::gil_scoped_acquire gil;
    held->first(*held->second);
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Simulated NPU runtime registered as the PrivateUse1 backend";
  register_hooks();
  install_allocators();
  hccl::add_bindings(m);

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
    resolve_device_index(i);
    check_not_capturing("device synchronization (torch.npu.synchronize)");
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
  m.def("_graph_pool_handle", &graph_pool_handle);
  m.def("_event_elapsed_time", [](py::object start, py::object end) {
    auto a = start.attr("event_id").cast<uintptr_t>();
    auto b = end.attr("event_id").cast<uintptr_t>();
    TORCH_CHECK(a != 0 && b != 0, "elapsed_time needs both events to have been recorded first");
    return event_elapsed_ms(reinterpret_cast<void*>(a), reinterpret_cast<void*>(b));
  });

  py::class_<NpuGraph>(m, "_Graph")
      .def(py::init<>())
      .def("capture_begin", &NpuGraph::capture_begin, py::arg("pool") = 0)
      .def("capture_end", &NpuGraph::capture_end)
      .def("replay", &NpuGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &NpuGraph::reset)
      .def("pool", &NpuGraph::pool)
      .def("num_nodes", &NpuGraph::num_nodes);
}
