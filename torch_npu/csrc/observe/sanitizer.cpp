// The npu stream sanitizer: finds work on one npu stream that touches memory another
// stream used without synchronisation in between, and memory freed while a stream
// other than its allocation stream may still use it.
//
// The simulated device runs every kernel at once on the host, so such races never
// corrupt data here; on hardware they do, intermittently. The sanitizer therefore checks
// the ordering the program establishes, not what happened: as torch.cuda._sanitizer
// does, it gives each kernel a sequence number and each stream a vector clock of the
// work it is ordered after (its own kernels, events it waited for, host
// synchronisations), and an access races with an earlier one on another stream unless
// the current stream's clock covers it. Beyond the CUDA sanitizer it checks frees: the
// caching allocator hands a freed block out again to the next allocations on its
// allocation stream, so a free while another stream's use is not ordered before that
// stream (and no record_stream() told the allocator about the use) is a race once memory
// allocated there is touched by work not ordered after the use. The check is made at that
// point, not at the free: code that orders the allocation stream before it allocates again
// (FSDP2's reduce-scatter stream waits for the current stream before each reduce-scatter)
// is correct on hardware and reports nothing. It also sees work that never passes the
// dispatcher: NPU graph replays and collectives.
//
// It runs in the runtime, so a kernel costs a Python stack capture (code objects and
// offsets, symbolised only for a report) and a few hash lookups; off, it costs nothing.
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/stream.h"

#include <ATen/ATen.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/extension.h>

namespace torch {
// From libtorch_python (torch/csrc/profiler/python/combined_traceback.h, whose header
// needs nlohmann/json, which the wheel does not ship): Python frames for tracebacks, and
// their symbolisation into lists of {"filename", "line", "name"} dicts.
void installCapturedTracebackPython();
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>

#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace torch_npu::observe {

// Where a piece of work came from. Work of the autograd engine runs on its own threads,
// where there are no Python frames: it carries the autograd node and the stack of the
// forward operation that created the node instead.
struct Origin {
  std::shared_ptr<torch::CapturedTraceback> stack;
  std::string backward_node;  // "" outside the autograd engine
  std::shared_ptr<torch::CapturedTraceback> forward_stack;
};

struct SanitizedKernel {
  uint64_t seq = 0;
  int64_t stream = 0;
  std::string name;
  Origin origin;
};

namespace sanitizer {
namespace {

using Clock = std::unordered_map<int64_t, uint64_t>;  // stream -> last kernel it is ordered after

struct Access {
  std::shared_ptr<SanitizedKernel> kernel;
  bool write = false;
  bool is_output = false;
  std::string argument;
};

// Memory freed while a stream other than its allocation stream had a use not ordered
// before the allocation stream: a block allocated on that stream meanwhile may be this
// memory, and touching it is a race until the toucher is ordered after the use.
struct FreedInUse {
  const void* ptr = nullptr;
  std::string description;
  int64_t allocation_stream = 0;
  Access use;
  Origin allocation;
  std::shared_ptr<torch::CapturedTraceback> free_stack;
  bool reported = false;  // each such free is reported once
};

struct Block {
  size_t size = 0;
  c10::DeviceIndex device = 0;
  bool allocation_seen = false;
  int64_t allocation_stream = 0;
  Origin allocation;
  std::vector<std::shared_ptr<FreedInUse>> may_reuse;  // see FreedInUse
  std::string description;
  std::optional<Access> last_write;
  std::unordered_map<int64_t, Access> reads_since_write;  // last read per stream
  std::unordered_map<int64_t, Access> last_use;           // last access per stream
  std::unordered_set<int64_t> recorded_streams;
};

// One finding, kept until it is raised.
struct Finding {
  std::string kind;  // "unsynchronized_access" or "freed_in_use"
  const void* data_ptr = nullptr;
  std::string tensor;
  Access current;
  int64_t current_stream = 0;
  Access previous;
  Origin allocation;
  std::shared_ptr<torch::CapturedTraceback> free_stack;
  int64_t allocation_stream = 0;
};

std::atomic<bool> g_enabled{false};
bool is_enabled() { return g_enabled.load(std::memory_order_relaxed); }
std::mutex g_mutex;
uint64_t g_seq = 0;
std::unordered_map<int64_t, Clock> g_streams;
Clock g_host;  // what every stream is ordered after because the host waited for it
std::unordered_map<const void*, Clock> g_events;
std::unordered_map<const void*, Block> g_blocks;
std::vector<Finding> g_pending;  // found where raising was impossible
// Per allocation stream: frees whose use that stream is not ordered after yet.
std::unordered_map<int64_t, std::vector<std::shared_ptr<FreedInUse>>> g_freed_in_use;
constexpr size_t kMaxFreedInUsePerStream = 4096;

// The stacks of forward operations by the autograd node they created: per forward thread,
// a ring indexed by the node's sequence number (bounded memory; a node older than the ring
// is reported without its forward stack).
struct ForwardSlot {
  uint64_t sequence_nr = UINT64_MAX;
  std::shared_ptr<torch::CapturedTraceback> stack;
};
constexpr size_t kForwardRing = 1 << 14;
std::unordered_map<uint64_t, std::vector<ForwardSlot>> g_forward_stacks;
py::object* g_reporter = nullptr;  // torch_npu.npu._sanitizer._report (never destroyed)

// The kernel running on this thread, so allocations inside it share its stack.
thread_local SanitizedKernel* tls_kernel = nullptr;

std::shared_ptr<torch::CapturedTraceback> gather_stack() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

// The origin of work starting now on this thread. In the autograd engine: its node and
// the forward stack recorded for it; elsewhere: the stack, which is remembered as the
// forward stack of the autograd node the operation created (the node's sequence number is
// the last one taken on this thread). Takes g_mutex.
Origin gather_origin() {
  Origin o;
  o.stack = gather_stack();
  auto node = torch::autograd::get_current_node();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (node) {
    o.backward_node = node->name();
    auto it = g_forward_stacks.find(node->thread_id());
    if (it != g_forward_stacks.end()) {
      const ForwardSlot& slot = it->second[node->sequence_nr() % kForwardRing];
      if (slot.sequence_nr == node->sequence_nr()) o.forward_stack = slot.stack;
    }
    return o;
  }
  const uint64_t next = at::sequence_number::peek();
  if (next == 0) return o;
  auto& ring = g_forward_stacks[at::RecordFunction::currentThreadId()];
  if (ring.empty()) ring.resize(kForwardRing);
  ForwardSlot& slot = ring[(next - 1) % kForwardRing];
  // The first work after the node was created is the operation that created it.
  if (slot.sequence_nr != next - 1) slot = ForwardSlot{next - 1, o.stack};
  return o;
}

void merge(Clock& into, const Clock& from) {
  for (const auto& [stream, seq] : from) {
    auto& mine = into[stream];
    if (seq > mine) mine = seq;
  }
}

Clock& clock_of(int64_t stream) {
  auto it = g_streams.find(stream);
  if (it == g_streams.end()) it = g_streams.emplace(stream, g_host).first;
  return it->second;
}

bool ordered_after(int64_t current, const Access& earlier) {
  if (earlier.kernel->stream == current) return true;
  const Clock& c = clock_of(current);
  auto it = c.find(earlier.kernel->stream);
  return it != c.end() && earlier.kernel->seq <= it->second;
}

Block& block_of(const void* ptr, const std::string& description) {
  auto it = g_blocks.find(ptr);
  if (it == g_blocks.end()) {
    it = g_blocks.emplace(ptr, Block{}).first;
    it->second.description = description;
  }
  return it->second;
}

std::string stream_name(int64_t key) {
  c10::DeviceIndex device = static_cast<c10::DeviceIndex>(key >> 48);
  int64_t id = key & ((int64_t{1} << 48) - 1);
  if (id == kCollectiveStreamId) return "npu:" + std::to_string(device) + " collective stream (hccl)";
  return "npu:" + std::to_string(device) + " stream " + std::to_string(id) + (id == 0 ? " (default)" : "");
}

// ---- reports -------------------------------------------------------------------

py::object symbolized(const std::shared_ptr<torch::CapturedTraceback>& tb) {
  if (!tb) return py::none();
  std::vector<torch::CapturedTraceback*> one{tb.get()};
  return torch::py_symbolize(one).at(0);
}

void add_origin(py::dict& d, const std::string& prefix, const Origin& o) {
  d[(prefix + "stack").c_str()] = symbolized(o.stack);
  d[(prefix + "backward_node").c_str()] = o.backward_node;
  d[(prefix + "forward_stack").c_str()] = symbolized(o.forward_stack);
}

py::dict access_dict(const Access& a) {
  py::dict d;
  d["operator"] = a.kernel->name;
  d["stream"] = stream_name(a.kernel->stream);
  d["type"] = a.write ? "write" : "read";
  d["argument"] = a.argument;
  d["is_output"] = a.is_output;
  add_origin(d, "", a.kernel->origin);
  return d;
}

py::dict finding_dict(const Finding& f) {
  py::dict d;
  d["kind"] = f.kind;
  d["data_ptr"] = reinterpret_cast<uintptr_t>(f.data_ptr);
  d["tensor"] = f.tensor;
  d["current"] = f.current.kernel ? py::object(access_dict(f.current)) : py::object(py::none());
  d["previous"] = access_dict(f.previous);
  add_origin(d, "allocation_", f.allocation);
  d["allocation_stream"] = stream_name(f.allocation_stream);
  d["free_stack"] = symbolized(f.free_stack);
  return d;
}

// Hands the findings to Python, which raises; the exception travels back through the
// dispatcher to the caller. Must be called without g_mutex held.
[[noreturn]] void raise_findings(std::vector<Finding> findings) {
  py::gil_scoped_acquire gil;
  py::list items;
  for (const Finding& f : findings) items.append(finding_dict(f));
  findings.clear();
  if (g_reporter != nullptr) (*g_reporter)(items);  // raises
  throw std::runtime_error("npu sanitizer: data race detected (reporter missing)");
}

std::vector<Finding> take_pending_locked() {
  std::vector<Finding> out;
  out.swap(g_pending);
  return out;
}

void check_against(std::vector<Finding>& findings, const void* ptr, Block& block, const Access& current,
                   int64_t stream, const Access& previous, const std::string& description) {
  if (ordered_after(stream, previous)) return;
  Finding f;
  f.kind = "unsynchronized_access";
  f.data_ptr = ptr;
  f.tensor = description;
  f.current = current;
  f.current_stream = stream;
  f.previous = previous;
  f.allocation = block.allocation;
  f.allocation_stream = block.allocation_stream;
  findings.push_back(std::move(f));
}

// Work on `stream` touches `block`, which may be memory freed while in use (FreedInUse):
// a race unless the stream is ordered after that use by now.
void check_reuse(std::vector<Finding>& findings, Block& block, const Access& current, int64_t stream) {
  auto& candidates = block.may_reuse;
  for (auto it = candidates.begin(); it != candidates.end();) {
    FreedInUse& freed = **it;
    if (!freed.reported && !ordered_after(stream, freed.use)) {
      freed.reported = true;
      Finding f;
      f.kind = "freed_in_use";
      f.data_ptr = freed.ptr;
      f.tensor = freed.description;
      f.current = current;
      f.current_stream = stream;
      f.previous = freed.use;
      f.allocation = freed.allocation;
      f.allocation_stream = freed.allocation_stream;
      f.free_stack = freed.free_stack;
      findings.push_back(std::move(f));
    }
    it = candidates.erase(it);  // reported once; or ordered for this and later work
  }
}

// Drops the frees the allocation stream `stream` is ordered after by now; returns the rest.
std::vector<std::shared_ptr<FreedInUse>>& unresolved_frees(int64_t stream) {
  auto& list = g_freed_in_use[stream];
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const std::shared_ptr<FreedInUse>& f) {
                              return f->reported || ordered_after(stream, f->use);
                            }),
             list.end());
  return list;
}

}  // namespace

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

std::shared_ptr<SanitizedKernel> on_kernel(const std::string& name, int64_t stream,
                                           const std::vector<TensorAccess>& accesses) {
  if (!enabled()) return nullptr;
  auto kernel = std::make_shared<SanitizedKernel>();
  kernel->name = name;
  kernel->stream = stream;
  kernel->origin = gather_origin();
  std::vector<Finding> findings;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    findings = take_pending_locked();
    kernel->seq = ++g_seq;
    clock_of(stream)[stream] = kernel->seq;
    for (const TensorAccess& a : accesses) {
      Block& block = block_of(a.storage, a.description);
      Access current{kernel, a.write, a.is_output, a.argument};
      if (!block.may_reuse.empty()) check_reuse(findings, block, current, stream);
      if (!a.write) {
        if (block.last_write) check_against(findings, a.storage, block, current, stream, *block.last_write, a.description);
        block.reads_since_write[stream] = current;
      } else {
        if (!block.reads_since_write.empty()) {
          for (const auto& [s, read] : block.reads_since_write) {
            check_against(findings, a.storage, block, current, stream, read, a.description);
          }
        } else if (block.last_write) {
          check_against(findings, a.storage, block, current, stream, *block.last_write, a.description);
        }
        block.last_write = current;
        block.reads_since_write.clear();
      }
      block.last_use[stream] = current;
    }
  }
  if (!findings.empty()) raise_findings(std::move(findings));
  tls_kernel = kernel.get();
  return kernel;
}

void on_kernel_end(const std::shared_ptr<SanitizedKernel>& kernel, const std::vector<TensorAccess>& outputs) {
  if (tls_kernel == kernel.get()) tls_kernel = nullptr;
  if (!enabled() || outputs.empty()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const TensorAccess& a : outputs) {
    Block& block = block_of(a.storage, a.description);
    Access current{kernel, true, true, a.argument};
    block.description = a.description;
    block.last_write = current;
    block.reads_since_write.clear();
    block.last_use[kernel->stream] = current;
  }
}

void on_allocated(void* ptr, size_t size, c10::DeviceIndex device) {
  Origin origin = tls_kernel != nullptr ? tls_kernel->origin : gather_origin();
  int64_t stream = stream_key(current_stream(device));
  std::lock_guard<std::mutex> lock(g_mutex);
  Block& block = g_blocks[ptr];
  block = Block{};
  block.size = size;
  block.device = device;
  block.allocation_seen = true;
  block.allocation_stream = stream;
  block.allocation = std::move(origin);
  auto it = g_freed_in_use.find(stream);
  if (it != g_freed_in_use.end() && !it->second.empty()) block.may_reuse = unresolved_frees(stream);
  block.description = std::to_string(size) + " bytes on npu:" + std::to_string(device);
}

void on_freed(void* ptr, bool graph_pool) {
  std::vector<std::shared_ptr<FreedInUse>> found;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks.find(ptr);
    if (it == g_blocks.end()) return;
    Block& block = it->second;
    // Graph pool memory goes back with its graph, after the replays that use it.
    if (block.allocation_seen && !graph_pool) {
      for (const auto& [stream, use] : block.last_use) {
        if (stream == block.allocation_stream || block.recorded_streams.count(stream)) continue;
        if (ordered_after(block.allocation_stream, use)) continue;
        auto f = std::make_shared<FreedInUse>();
        f->ptr = ptr;
        f->description = block.description;
        f->allocation_stream = block.allocation_stream;
        f->use = use;
        f->allocation = block.allocation;
        found.push_back(std::move(f));
      }
    }
    g_blocks.erase(it);
  }
  if (found.empty()) return;
  // Not a race yet: only once memory allocated on the allocation stream is touched by
  // work not ordered after the use (check_reuse). A free cannot raise anyway (it runs in
  // a destructor).
  auto free_stack = gather_stack();
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& f : found) {
    f->free_stack = free_stack;
    auto& list = g_freed_in_use[f->allocation_stream];
    if (list.size() >= kMaxFreedInUsePerStream) list.erase(list.begin());
    list.push_back(std::move(f));
  }
}

void record_stream(const void* storage, int64_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blocks.find(storage);
  if (it != g_blocks.end()) it->second.recorded_streams.insert(stream);
}

void event_record(const void* event, int64_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const void* work = completing_collective();
  if (work != nullptr && (stream & ((int64_t{1} << 48) - 1)) == kCollectiveStreamId) {
    // A completing collective's Future: the event stands for the collective's issue point.
    auto it = g_events.find(work);
    if (it != g_events.end()) {
      Clock issued = it->second;
      g_events[event] = std::move(issued);
      return;
    }
  }
  g_events[event] = clock_of(stream);
}

void event_wait(const void* event, int64_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_events.find(event);
  if (it == g_events.end()) return;  // never recorded: nothing to wait for
  merge(clock_of(stream), it->second);
}

void host_waits_for(const Clock& done) {
  merge(g_host, done);
  for (auto& [stream, clock] : g_streams) merge(clock, g_host);
}

void event_synchronize(const void* event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_events.find(event);
  if (it == g_events.end()) return;
  Clock done = it->second;
  host_waits_for(done);
}

void event_destroy(const void* event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.erase(event);
}

void stream_wait(int64_t waiter, int64_t waited) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Clock done = clock_of(waited);
  merge(clock_of(waiter), done);
}

void stream_synchronize(int64_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Clock done = clock_of(stream);
  host_waits_for(done);
}

void device_synchronize(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Clock done;
  for (const auto& [stream, clock] : g_streams) {
    if (device < 0 || (stream >> 48) == device) merge(done, clock);
  }
  host_waits_for(done);
}

// ---- control from Python ----------------------------------------------------------

void enable(py::object reporter) {
  torch::installCapturedTracebackPython();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_reporter == nullptr) g_reporter = new py::object();
    *g_reporter = std::move(reporter);
  }
  if (!g_enabled.exchange(true)) add_watcher(kSanitizer);
}

void disable() {
  if (g_enabled.exchange(false)) remove_watcher(kSanitizer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_streams.clear();
  g_host.clear();
  g_events.clear();
  g_blocks.clear();
  g_pending.clear();
  g_freed_in_use.clear();
  g_forward_stacks.clear();
}

// Raises the findings that could not be raised where they were found.
void check_pending() {
  std::vector<Finding> findings;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    findings = take_pending_locked();
  }
  if (!findings.empty()) raise_findings(std::move(findings));
}

size_t pending_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_pending.size();
}

}  // namespace sanitizer

// ---- hooks the runtime calls --------------------------------------------------------

void on_record_stream(const at::Tensor& t, const c10::Stream& stream) {
  if (!sanitizer::enabled() || !t.has_storage() || t.storage().data() == nullptr) return;
  sanitizer::record_stream(t.storage().data(), stream_key(stream));
}
void on_event_record(const void* event, const c10::Stream& stream) {
  if (sanitizer::enabled()) sanitizer::event_record(event, stream_key(stream));
}
void on_event_wait(const void* event, const c10::Stream& stream) {
  if (sanitizer::enabled()) sanitizer::event_wait(event, stream_key(stream));
}
void on_event_synchronize(const void* event) {
  if (sanitizer::enabled()) sanitizer::event_synchronize(event);
}
void on_event_destroy(const void* event) {
  if (sanitizer::enabled()) sanitizer::event_destroy(event);
}
void on_stream_synchronize(const c10::Stream& stream) {
  if (sanitizer::enabled()) sanitizer::stream_synchronize(stream_key(stream));
}
void on_stream_wait(const c10::Stream& waiter, const c10::Stream& waited) {
  if (sanitizer::enabled()) sanitizer::stream_wait(stream_key(waiter), stream_key(waited));
}
void on_device_synchronize(c10::DeviceIndex device) {
  if (sanitizer::enabled()) sanitizer::device_synchronize(device);
}

void on_block_allocated(void* ptr, size_t size, c10::DeviceIndex device) {
  if (sanitizer::enabled()) sanitizer::on_allocated(ptr, size, device);
}

void on_block_freed(void* ptr, int64_t pool) {
  if (sanitizer::enabled()) sanitizer::on_freed(ptr, pool != 0);
}

// ---- Python bindings ------------------------------------------------------------------

void bind_observers(py::module_& m) {
  m.def("_profiler_registered", &profiler::registered);
  m.def("_sanitizer_enable", &sanitizer::enable);
  m.def("_sanitizer_disable", &sanitizer::disable);
  m.def("_sanitizer_enabled", &sanitizer::enabled);
  m.def("_sanitizer_check", &sanitizer::check_pending);
  m.def("_sanitizer_pending", &sanitizer::pending_count);
  m.def(
      "_sanitizer_kernel",
      [](const std::string& name, py::object stream, const std::vector<at::Tensor>& reads,
         const std::vector<at::Tensor>& writes) {
        // Work the runtime does not run itself (collectives of a process group on their
        // stream): announced so the sanitizer checks it like any kernel.
        if (!sanitizer::enabled()) return;
        c10::Stream s = current_stream(current_device());
        if (!stream.is_none()) {
          s = c10::Stream::unpack3(stream.attr("stream_id").cast<c10::StreamId>(),
                                   stream.attr("device_index").cast<c10::DeviceIndex>(),
                                   static_cast<c10::DeviceType>(stream.attr("device_type").cast<int64_t>()));
        } else if (!writes.empty() && writes[0].device().type() == kNpu) {
          s = current_stream(writes[0].device().index());
        } else if (!reads.empty() && reads[0].device().type() == kNpu) {
          s = current_stream(reads[0].device().index());
        }
        py::gil_scoped_release release;
        KernelLaunch launch(WorkKind::Kernel, name);
        for (const auto& t : reads) add_access(launch.accesses(), t, false, false, "input");
        for (const auto& t : writes) add_access(launch.accesses(), t, true, false, "output");
        launch.start(s);
      },
      py::arg("name"), py::arg("stream"), py::arg("reads"), py::arg("writes"));
}

}  // namespace torch_npu::observe
