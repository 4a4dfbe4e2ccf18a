// NPU graph capture and replay.
//
// A capture belongs to a stream, as on CUDA: operators queued on a stream being captured
// are recorded instead of run, whichever thread queues them (autograd's device threads run
// a backward on the stream its forward ran on, so a captured training step records its
// backward too), while work on every other stream runs as usual. Output shapes come from
// the operators' meta kernels, output memory from the graph's private pool, and replay
// later runs the recorded CPU kernels on exactly that memory (record_operator.cpp).
// Anything that needs the host to wait for the captured work aborts the capture; other
// host syncs follow the capture's error mode. A check run (`check_begin`) applies the
// same rules without recording: the work runs, and each operation a capture could not
// record is reported instead.
#include "torch_npu/csrc/graphs/graph_capture.h"
#include "torch_npu/csrc/graphs/npu_graph.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/observe/sync_debug.h"
#include "torch_npu/csrc/graphs/capture.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace torch_npu {

namespace {

// ---- the captures underway ---------------------------------------------------
std::mutex g_registry_mu;
std::vector<std::shared_ptr<GraphCapture>> g_captures;
std::atomic<int> g_num_captures{0};  // lets every eager op skip the registry
std::atomic<uint64_t> g_next_capture_id{1};

std::shared_ptr<GraphCapture> capture_of_stream_locked(c10::DeviceIndex device, c10::StreamId stream) {
  for (const auto& c : g_captures) {
    if (c->device == device && std::find(c->streams.begin(), c->streams.end(), stream) != c->streams.end()) {
      return c;
    }
  }
  return nullptr;
}

void register_capture(const std::shared_ptr<GraphCapture>& c) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_captures.push_back(c);
  g_num_captures.store(static_cast<int>(g_captures.size()));
}

void unregister_capture(const GraphCapture* c) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_captures.erase(std::remove_if(g_captures.begin(), g_captures.end(),
                                  [c](const std::shared_ptr<GraphCapture>& x) { return x.get() == c; }),
                   g_captures.end());
  g_num_captures.store(static_cast<int>(g_captures.size()));
}

std::string stream_name(c10::DeviceIndex device, c10::StreamId stream) {
  return "stream " + std::to_string(stream) + " of npu:" + std::to_string(static_cast<int>(device));
}

void drop_python_refs(std::vector<GraphNode>& nodes) {
  bool any = false;
  for (const auto& n : nodes) any = any || n.callable != nullptr;
  if (!any || !Py_IsInitialized()) {
    nodes.clear();
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  for (auto& n : nodes) {
    Py_XDECREF(n.callable);
    Py_XDECREF(n.args);
    n.callable = n.args = nullptr;
  }
  nodes.clear();
  PyGILState_Release(gil);
}

}  // namespace

[[noreturn]] void abort_capture(const std::shared_ptr<GraphCapture>& c, const std::string& message) {
  std::vector<GraphNode> dropped;
  std::vector<at::Tensor> released;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->aborted) {
      c->aborted = true;
      c->abort_reason = message;
      dropped = std::move(c->nodes);
      released = std::move(c->keep_alive);
    }
  }
  unregister_capture(c.get());
  drop_python_refs(dropped);
  TORCH_CHECK(false, message);
}

void report_capture_problem(const std::shared_ptr<GraphCapture>& c, const std::string& kind, const std::string& op,
                            const std::string& detail) {
  c->sink(CaptureProblem{kind, op, detail});
}

namespace {

std::string host_sync_message(const std::string& what) {
  return what +
         " needs the host to wait for the npu, which is not allowed while an NPU graph is being "
         "captured. The capture was aborted; move this call outside the captured region "
         "(torch.npu.graphs.capture_report(step) lists every such call of a step).";
}

// A capture underway that forbids host syncs of this thread on other streams, if any.
std::shared_ptr<GraphCapture> capture_forbidding_host_syncs() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  const auto self = std::this_thread::get_id();
  for (const auto& c : g_captures) {
    if (c->checking()) continue;
    if (c->mode == CaptureErrorMode::Global) return c;
    if (c->mode == CaptureErrorMode::ThreadLocal && c->owner == self) return c;
  }
  return nullptr;
}

[[noreturn]] void refuse_host_sync(const GraphCapture& c, const std::string& what) {
  const bool other_thread = c.owner != std::this_thread::get_id();
  TORCH_CHECK(false, what, " is not allowed while an NPU graph is being captured on ",
              stream_name(c.device, c.streams.front()), " with capture_error_mode='",
              c.mode == CaptureErrorMode::Global ? "global" : "thread_local", "'",
              other_thread ? " by another thread" : "", ". Run it before or after the capture",
              c.mode == CaptureErrorMode::Global
                  ? ", or capture with capture_error_mode='thread_local' (other threads may sync) or "
                    "'relaxed'"
                  : ", or capture with capture_error_mode='relaxed'",
              ". The capture itself goes on.");
}

}  // namespace

// ---- queries used by the kernels, the allocator and the guard ------------------

std::shared_ptr<GraphCapture> active_capture() {
  if (g_num_captures.load(std::memory_order_acquire) == 0) return nullptr;
  c10::DeviceIndex device = current_device();
  c10::StreamId stream = current_stream(device).id();
  std::lock_guard<std::mutex> lock(g_registry_mu);
  return capture_of_stream_locked(device, stream);
}

bool is_recording() {
  auto c = active_capture();
  return c != nullptr && !c->checking();
}

int64_t capture_pool_for_allocation(c10::DeviceIndex device) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) return 0;
  c10::StreamId stream = current_stream(device).id();
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto c = capture_of_stream_locked(device, stream);
  return c != nullptr && !c->checking() ? c->pool : 0;
}

uint64_t capture_id_of_stream(const c10::Stream& stream) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) return 0;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto c = capture_of_stream_locked(stream.device_index(), stream.id());
  return c != nullptr ? c->id : 0;
}

bool is_capture_underway(uint64_t capture_id) {
  if (capture_id == 0 || g_num_captures.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (const auto& c : g_captures) {
    if (c->id == capture_id) return true;
  }
  return false;
}

void join_capture(uint64_t capture_id, const c10::Stream& stream) {
  if (capture_id == 0) return;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (const auto& c : g_captures) {
    if (c->id != capture_id) continue;
    if (c->device != stream.device_index()) return;
    if (std::find(c->streams.begin(), c->streams.end(), stream.id()) == c->streams.end()) {
      TORCH_CHECK(capture_of_stream_locked(stream.device_index(), stream.id()) == nullptr,
                  stream_name(stream.device_index(), stream.id()),
                  " is being captured into another NPU graph and cannot wait on an event of this one");
      c->streams.push_back(stream.id());
    }
    return;
  }
}

void check_not_capturing(const char* what) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) {
    note_host_sync(what);  // every caller is a host synchronisation point
    return;
  }
  if (auto c = active_capture()) {
    if (c->checking()) {
      report_capture_problem(c, "host sync", what, host_sync_message(what));
      return;
    }
    abort_capture(c, host_sync_message(what));
  }
  if (auto c = capture_forbidding_host_syncs()) refuse_host_sync(*c, what);
}

void check_stream_sync(const c10::Stream& stream, const char* what) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) {
    note_host_sync(what);
    return;
  }
  std::shared_ptr<GraphCapture> waited;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    waited = capture_of_stream_locked(stream.device_index(), stream.id());
  }
  if (waited != nullptr) {
    if (waited->checking()) {
      report_capture_problem(waited, "host sync", what, host_sync_message(what));
      return;
    }
    abort_capture(waited, host_sync_message(what));
  }
  if (auto c = capture_forbidding_host_syncs()) refuse_host_sync(*c, what);
}

void check_device_sync(c10::DeviceIndex device, const char* what) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) {
    note_host_sync(what);
    return;
  }
  // A device-wide wait includes the captured streams of this thread's own captures.
  std::shared_ptr<GraphCapture> own;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (const auto& c : g_captures) {
      if (c->device == device && c->owner == std::this_thread::get_id()) own = c;
    }
  }
  if (own != nullptr) {
    if (own->checking()) {
      report_capture_problem(own, "host sync", what, host_sync_message(what));
      return;
    }
    abort_capture(own, host_sync_message(what));
  }
  check_not_capturing(what);
}

void check_generator_not_capturing(const char* what) {
  if (g_num_captures.load(std::memory_order_acquire) == 0) return;
  auto c = active_capture();
  if (c == nullptr) return;
  // CUDA's generators refuse these calls during capture (at::cuda::assertNotCapturing):
  // a captured graph replays its draws at the generator's offset of each replay, which
  // a seed or state read or written now could not follow. The capture is left as it was.
  const std::string message =
      std::string("Cannot call ") + what + " during NPU graph capture: the seed and offset of an npu generator " +
      "can be neither read nor changed while " + stream_name(c->device, c->streams.front()) +
      " is being captured. Seed, save or restore generators before capture_begin() or after capture_end() "
      "(Generator.graphsafe_set_state is allowed). The capture itself goes on.";
  if (c->checking()) {
    report_capture_problem(c, "generator state", what, message);
    return;
  }
  TORCH_CHECK(false, message);
}

void record_host_call(std::function<void()> fn, std::vector<at::Tensor> keep) {
  auto capture = active_capture();
  TORCH_INTERNAL_ASSERT(capture != nullptr && !capture->checking());
  GraphNode node;
  node.native = std::move(fn);
  capture->add_node(std::move(node), std::move(keep));
}

// The message of the pending Python exception (cleared). Needs the GIL.
static std::string fetch_python_error() {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
  const char* utf8 = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
  std::string message = utf8 != nullptr ? utf8 : "unknown error";
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return message;
}

void record_python_call(PyObject* callable, PyObject* args, const ObservedCall& observed) {
  auto capture = active_capture();
  TORCH_INTERNAL_ASSERT(capture != nullptr && !capture->checking());
  GraphNode node;
  Py_INCREF(callable);
  Py_INCREF(args);
  node.callable = callable;
  node.args = args;
  // The call as one node, for replays the profiler or the sanitizer watch; it borrows the
  // node's references, which outlive every replay.
  std::function<void()> call = [callable, args]() {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* result = PyObject_Call(callable, args, nullptr);
    if (result == nullptr) {
      std::string message = fetch_python_error();
      PyGILState_Release(gil);
      TORCH_CHECK(false, "a host kernel recorded in this NPUGraph failed during replay: ", message);
    }
    Py_DECREF(result);
    PyGILState_Release(gil);
  };
  node.native = observed ? observed(std::move(call)) : std::move(call);
  {
    std::lock_guard<std::mutex> lock(capture->mu);
    if (!capture->aborted) {
      capture->nodes.push_back(node);
      return;
    }
  }
  Py_DECREF(callable);
  Py_DECREF(args);
}

// ---- graphs ------------------------------------------------------------------

CaptureErrorMode parse_capture_error_mode(const std::string& mode) {
  if (mode == "global") return CaptureErrorMode::Global;
  if (mode == "thread_local") return CaptureErrorMode::ThreadLocal;
  if (mode == "relaxed") return CaptureErrorMode::Relaxed;
  TORCH_CHECK_VALUE(false, "capture_error_mode must be one of ('global', 'thread_local', 'relaxed'), got '", mode,
                    "'");
}

namespace {

// Takes `mu` without holding the GIL while waiting (the holder may need the GIL to finish).
std::unique_lock<std::mutex> lock_without_gil(std::mutex& mu) {
  std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
  if (lock.owns_lock()) return lock;
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS
    lock.lock();
    Py_END_ALLOW_THREADS
  } else {
    lock.lock();
  }
  return lock;
}

}  // namespace

NpuGraph::NpuGraph() = default;
NpuGraph::~NpuGraph() {
  try {
    reset();
  } catch (...) {
  }
}

size_t NpuGraph::num_nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size();
}

size_t NpuGraph::num_kernel_launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const GraphNode& n) { return n.callable != nullptr; }));
}

void NpuGraph::register_generator_state(const at::Generator& generator) {
  TORCH_CHECK(generator.defined() && generator.device().type() == c10::DeviceType::PrivateUse1,
              "NPUGraph.register_generator_state expects an npu generator (torch.Generator(device='npu')), got ",
              generator.defined() ? "a generator of " + generator.device().str() : std::string("None"));
  auto lock = lock_without_gil(mu_);
  TORCH_CHECK(capture_ == nullptr, "Cannot register a generator with an NPUGraph during its capture; call "
              "register_generator_state before capture_begin()");
  for (const auto& g : registered_generators_) {
    if (g.unsafeGetGeneratorImpl() == generator.unsafeGetGeneratorImpl()) return;
  }
  registered_generators_.push_back(generator);
}

void NpuGraph::capture_begin(int64_t pool, const std::string& capture_error_mode) {
  CaptureErrorMode mode = parse_capture_error_mode(capture_error_mode);
  auto lock = lock_without_gil(mu_);
  TORCH_CHECK(capture_ == nullptr, "This NPUGraph is already capturing; end it with capture_end() first");
  TORCH_CHECK(nodes_.empty() && !captured_, "This NPUGraph already holds a capture; call reset() before "
              "capturing again");
  lazy_init();
  c10::DeviceIndex device = current_device();
  c10::Stream stream = current_stream(device);
  // CUDA's wording (CUDAGraph::capture_begin), checked before anything is set up.
  TORCH_CHECK(stream.id() != 0, "NPU graphs must be captured on a non-default stream. (However, after capture, "
              "it's ok to replay them on the default stream.) Capture inside `with torch.npu.graph(g):` (which "
              "uses a side stream) or `with torch.npu.stream(s):`");
  TORCH_CHECK(capture_id_of_stream(stream) == 0, stream_name(device, stream.id()),
              " is already being captured into another NPU graph");
  int64_t chosen = pool != 0 ? pool : new_pool_id();
  retain_pool(chosen);
  pool_ = chosen;
  abort_reason_.clear();
  capture_ = std::make_shared<GraphCapture>(g_next_capture_id++, pool_, stream, mode, CaptureProblemSink());
  capture_->registered_generators = registered_generators_;
  register_capture(capture_);
}

void NpuGraph::check_begin(CaptureProblemSink sink) {
  TORCH_INTERNAL_ASSERT(sink);
  auto lock = lock_without_gil(mu_);
  TORCH_CHECK(capture_ == nullptr && nodes_.empty() && !captured_,
              "capture_report needs an NPUGraph that holds no capture");
  lazy_init();
  c10::DeviceIndex device = current_device();
  c10::Stream stream = current_stream(device);
  TORCH_CHECK(capture_id_of_stream(stream) == 0, stream_name(device, stream.id()),
              " is already being captured into an NPU graph");
  capture_ = std::make_shared<GraphCapture>(g_next_capture_id++, 0, stream, CaptureErrorMode::Relaxed,
                                            std::move(sink));
  capture_->registered_generators = registered_generators_;
  register_capture(capture_);
}

void NpuGraph::capture_end() {
  std::vector<GraphNode> dropped;
  std::string failure;
  {
    auto lock = lock_without_gil(mu_);
    TORCH_CHECK(capture_ != nullptr, "capture_end() called without capture_begin()");
    unregister_capture(capture_.get());
    std::shared_ptr<GraphCapture> c = std::move(capture_);
    std::lock_guard<std::mutex> capture_lock(c->mu);
    if (c->checking()) {
      nodes_.clear();
      captured_ = false;
      return;
    }
    if (c->aborted) {
      // Nothing of an aborted capture can be replayed; its pool goes now (memory still held
      // by tensors of the capture returns to the device as they are freed).
      abort_reason_ = c->abort_reason;
      captured_ = false;
      if (pool_ != 0) {
        release_pool(pool_);
        pool_ = 0;
      }
      failure = abort_reason_;
    } else {
      nodes_ = std::move(c->nodes);
      keep_alive_ = std::move(c->keep_alive);
      has_python_nodes_ = std::any_of(nodes_.begin(), nodes_.end(), [](const GraphNode& n) { return n.callable; });
      captured_ = true;
    }
  }
  TORCH_CHECK(failure.empty(), "capture_end(): the capture was aborted, so this NPUGraph holds nothing to "
              "replay: ", failure);
}

void NpuGraph::replay() {
  auto lock = lock_without_gil(mu_);
  TORCH_CHECK(abort_reason_.empty(), "This NPUGraph cannot be replayed: its capture was aborted (",
              abort_reason_, ")");
  TORCH_CHECK(capture_ == nullptr, "NPUGraph.replay() called during its own capture; call capture_end() first");
  TORCH_CHECK(captured_, "NPUGraph.replay() needs a finished capture (capture_begin/capture_end)");
  TORCH_CHECK(!is_recording(), "NPUGraph.replay() cannot run on a stream that is being captured");
  // A CPU op of its own in profiler traces; the replayed nodes are its device kernels.
  RECORD_FUNCTION("NPUGraph.replay", std::vector<c10::IValue>());
  // While the profiler or the sanitizer watches, every node runs through its native call,
  // which announces it (Python host kernels included: theirs takes the GIL for the call).
  if (has_python_nodes_ && !observe::watching()) {
    // Python host kernels: the GIL is held across the whole replay, so each launch costs a
    // call with a prebuilt argument tuple and nothing more.
    PyGILState_STATE gil = PyGILState_Ensure();
    try {
      for (auto& node : nodes_) {
        if (node.callable != nullptr) {
          PyObject* result = PyObject_Call(node.callable, node.args, nullptr);
          if (result == nullptr) {
            TORCH_CHECK(false, "a host kernel recorded in this NPUGraph failed during replay: ",
                        fetch_python_error());
          }
          Py_DECREF(result);
        } else {
          node.native();
        }
      }
    } catch (...) {
      PyGILState_Release(gil);
      throw;
    }
    PyGILState_Release(gil);
    return;
  }
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS
    try {
      for (auto& node : nodes_) node.native();
    } catch (...) {
      Py_BLOCK_THREADS
      throw;
    }
    Py_END_ALLOW_THREADS
  } else {
    for (auto& node : nodes_) node.native();
  }
}

std::vector<GraphNode> NpuGraph::take_nodes_locked() {
  std::vector<GraphNode> taken = std::move(nodes_);
  nodes_.clear();
  return taken;
}

void NpuGraph::reset() {
  std::vector<GraphNode> dropped;
  std::vector<at::Tensor> released;
  {
    auto lock = lock_without_gil(mu_);
    if (capture_ != nullptr) {
      unregister_capture(capture_.get());
      std::lock_guard<std::mutex> capture_lock(capture_->mu);
      for (auto& n : capture_->nodes) dropped.push_back(std::move(n));
      capture_->nodes.clear();
      capture_->aborted = true;
      capture_.reset();
    }
    for (auto& n : take_nodes_locked()) dropped.push_back(std::move(n));
    released = std::move(keep_alive_);
    keep_alive_.clear();
    registered_generators_.clear();  // as CUDA's reset forgets its generator states
    abort_reason_.clear();
    captured_ = false;
    has_python_nodes_ = false;
    if (pool_ != 0) {
      release_pool(pool_);
      pool_ = 0;
    }
  }
  drop_python_refs(dropped);
}

int64_t graph_pool_handle() { return new_pool_id(); }

}  // namespace torch_npu
