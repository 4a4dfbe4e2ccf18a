// Python side of the allocator's memory history: turning recording on and off, and the
// snapshot dictionary in torch.cuda.memory._snapshot()'s format (segments with their
// blocks, one trace per device, Python stack frames), so torch.cuda._memory_viz and
// pytorch.org/memory_viz read npu snapshots unchanged.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/ATen.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/profiler/unwind/unwind.h>
#include <torch/extension.h>

#include <algorithm>
#include <limits>

// torch/csrc/profiler/python/combined_traceback.h declares this, but includes a JSON
// header the wheel does not ship; libtorch_python exports the function.
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace torch_npu {
namespace {

using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

std::shared_ptr<c10::GatheredContext> gather_python() { return torch::CapturedTraceback::gather(true, true, false); }
std::shared_ptr<c10::GatheredContext> gather_with_cpp() { return torch::CapturedTraceback::gather(true, true, true); }

void check_option(const std::string& value, std::initializer_list<const char*> valid, const char* what) {
  bool ok = std::any_of(valid.begin(), valid.end(), [&](const char* v) { return value == v; });
  TORCH_CHECK(ok, "expected ", what, " to be one of ",
              [&] {
                std::string s;
                for (const char* v : valid) s += std::string(s.empty() ? "" : ", ") + "'" + v + "'";
                return s;
              }(),
              ", got '", value, "'");
}

uint32_t parse_skip_actions(const std::vector<std::string>& actions) {
  uint32_t mask = 0;
  for (const std::string& a : actions) mask |= 1u << static_cast<unsigned>(c10::CachingDeviceAllocator::parseTraceEntryAction(a));
  return mask;
}

void record_history(std::optional<std::string> enabled, std::optional<std::string> context, const std::string& stacks,
                    size_t max_entries, bool clear_history, const std::vector<std::string>& skip_actions) {
  if (enabled) check_option(*enabled, {"state", "all"}, "enabled (or None)");
  if (context) check_option(*context, {"state", "alloc", "all"}, "context (or None)");
  check_option(stacks, {"python", "all"}, "stacks");
  CreateContextFn recorder = gather_python;
  if (enabled && stacks == "all") {
    recorder = gather_with_cpp;
    torch::unwind::unwind();  // warm up C++ stack unwinding
  }
  max_entries = (enabled && *enabled == "all") ? max_entries : 1;
  auto when = RecordContext::NEVER;
  if (context) {
    when = *context == "all" ? RecordContext::ALL : *context == "alloc" ? RecordContext::ALLOC : RecordContext::STATE;
  }
  lazy_init();
  record_memory_history(enabled.has_value(), recorder, max_entries, when, clear_history, parse_skip_actions(skip_actions));
}

// The pre-2.1 signature, still accepted by torch.cuda.memory._record_memory_history(True, ...).
void record_history_legacy(bool enabled, bool record_context, int64_t trace_alloc_max_entries,
                           bool trace_alloc_record_context, bool record_context_cpp, bool clear_history,
                           const std::vector<std::string>& skip_actions) {
  CreateContextFn recorder = gather_python;
  if (enabled && record_context_cpp) {
    recorder = gather_with_cpp;
    torch::unwind::unwind();
  }
  auto when = RecordContext::NEVER;
  if (trace_alloc_record_context) {
    when = RecordContext::ALLOC;
  } else if (record_context) {
    when = RecordContext::STATE;
  }
  lazy_init();
  record_memory_history(enabled, recorder, static_cast<size_t>(std::max<int64_t>(1, trace_alloc_max_entries)), when,
                        clear_history, parse_skip_actions(skip_actions));
}

const char* action_name(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::ALLOC:
      return "alloc";
    case TraceEntry::FREE_REQUESTED:
      return "free_requested";
    case TraceEntry::FREE_COMPLETED:
      return "free_completed";
    case TraceEntry::SEGMENT_ALLOC:
      return "segment_alloc";
    case TraceEntry::SEGMENT_FREE:
      return "segment_free";
    case TraceEntry::SEGMENT_MAP:
      return "segment_map";
    case TraceEntry::SEGMENT_UNMAP:
      return "segment_unmap";
    case TraceEntry::SNAPSHOT:
      return "snapshot";
    case TraceEntry::OOM:
      return "oom";
  }
  return "unknown";
}

py::tuple pool_tuple(const c10::MempoolId_t& id) {
  return py::make_tuple(static_cast<int64_t>(id.first), static_cast<int64_t>(id.second));
}

py::dict snapshot(std::optional<py::tuple> pool, bool include_traces) {
  std::optional<int64_t> pool_filter;
  if (pool.has_value()) {
    TORCH_CHECK(pool->size() >= 2, "memory_snapshot expects a pool id tuple (a, b)");
    int64_t a = (*pool)[0].cast<int64_t>();
    int64_t b = (*pool)[1].cast<int64_t>();
    if (a != 0 || b != 0) pool_filter = a != 0 ? a : b;
    if (pool->size() >= 3) include_traces = (*pool)[2].cast<bool>();
  }
  MemorySnapshot snap = memory_snapshot(pool_filter, include_traces);

  py::str frames_s = "frames";
  py::list empty_frames;
  std::vector<torch::CapturedTraceback*> to_gather;
  std::vector<py::dict> to_gather_dest;
  auto add_frames = [&](const py::dict& d, const std::shared_ptr<c10::GatheredContext>& ctx) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(ctx.get());
    if (tb != nullptr) {
      to_gather.push_back(tb);
      to_gather_dest.push_back(d);
    } else {
      d[frames_s] = empty_frames;
    }
  };

  py::list segments;
  for (const auto& seg : snap.segments) {
    py::dict s;
    s["device"] = static_cast<int64_t>(seg.device);
    s["address"] = seg.address;
    s["total_size"] = seg.total_size;
    s["allocated_size"] = seg.allocated_size;
    s["active_size"] = seg.active_size;
    s["requested_size"] = seg.requested_size;
    s["stream"] = reinterpret_cast<int64_t>(seg.stream);
    s["segment_type"] = seg.is_large ? "large" : "small";
    s["segment_pool_id"] = pool_tuple(seg.owner_private_pool_id);
    s["is_expandable"] = seg.is_expandable;
    add_frames(s, seg.context_when_allocated);
    size_t address = seg.address;
    py::list blocks;
    for (const auto& b : seg.blocks) {
      py::dict bd;
      bd["address"] = address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested_size;
      bd["state"] = b.allocated ? "active_allocated" : (b.active ? "active_pending_free" : "inactive");
      add_frames(bd, b.context_when_allocated);
      blocks.append(bd);
      address += b.size;
    }
    s["blocks"] = blocks;
    segments.append(s);
  }

  py::list traces;
  for (const auto& device_trace : snap.device_traces) {
    py::list trace;
    for (const auto& te : device_trace) {
      py::dict e;
      e["action"] = action_name(te.action_);
      e[te.action_ == TraceEntry::OOM ? "device_free" : "addr"] = te.addr_;
      e["size"] = te.size_;
      e["stream"] = reinterpret_cast<int64_t>(te.stream_);
      e["time_us"] = static_cast<int64_t>(te.time_.t_);
      e["pool_id"] = pool_tuple(te.mempool_);
      e["compile_context"] = te.compile_context_;
      e["user_metadata"] = te.user_metadata_;
      if (te.context_) {
        add_frames(e, te.context_);
      } else {
        e[frames_s] = empty_frames;
      }
      trace.append(e);
    }
    traces.append(trace);
  }

  AllocatorSettings cfg = allocator_settings();
  py::dict settings;
  settings["PYTORCH_NPU_ALLOC_CONF"] = cfg.settings;
  settings["max_split_size"] = static_cast<int64_t>(
      cfg.max_split_size == std::numeric_limits<size_t>::max() ? -1 : static_cast<int64_t>(cfg.max_split_size));
  settings["garbage_collection_threshold"] = cfg.garbage_collection_threshold;
  settings["expandable_segments"] = cfg.expandable_segments;
  py::dict roundup;
  size_t key = 1;
  for (size_t v : cfg.roundup_power2_divisions) {
    roundup[py::str(std::to_string(key))] = v;
    key *= 2;
  }
  settings["roundup_power2_divisions"] = roundup;

  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = traces;
  result["allocator_settings"] = settings;
  result["external_annotations"] = py::list();

  auto frames = torch::py_symbolize(to_gather);
  for (size_t i = 0; i < frames.size(); ++i) to_gather_dest[i][frames_s] = frames[i];
  return result;
}

}  // namespace

void register_memory_history_bindings(py::module_& m) {
  m.def("_npu_record_memory_history", &record_history, py::arg("enabled"), py::arg("context"), py::arg("stacks"),
        py::arg("max_entries"), py::arg("clear_history"), py::arg("skip_actions"));
  m.def("_npu_record_memory_history_legacy", &record_history_legacy);
  m.def("_npu_memory_snapshot", &snapshot, py::arg("pool") = std::nullopt, py::arg("include_traces") = true);
}

}  // namespace torch_npu
