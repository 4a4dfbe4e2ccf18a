// NPU graph capture and replay.
//
// A capture belongs to a stream, as on CUDA: operators queued on a stream being captured
// are recorded instead of run, whichever thread queues them (autograd's device threads run
// a backward on the stream its forward ran on, so a captured training step records its
// backward too), while work on every other stream runs as usual. Output shapes come from
// the operators' meta kernels, output memory from the graph's private pool, and replay
// later runs the recorded CPU kernels on exactly that memory. Anything that needs the host
// to wait for the captured work aborts the capture; other host syncs follow the capture's
// error mode. A check run (`check_begin`) applies the same rules without recording: the
// work runs, and each operation a capture could not record is reported instead.
#include "torch_npu/csrc/aten/cuda_dtype_widening.h"
#include "torch_npu/csrc/graphs/npu_graph.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/runtime/generator.h"
#include "torch_npu/csrc/observe/sync_debug.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/aten/cpu_aliases.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <unordered_map>
#include <atomic>
#include <thread>

namespace torch_npu {

class GraphCapture {
 public:
  GraphCapture(uint64_t id, int64_t pool, c10::Stream stream, CaptureErrorMode mode, CaptureProblemSink sink)
      : id(id), pool(pool), device(stream.device_index()), owner(std::this_thread::get_id()), mode(mode),
        sink(std::move(sink)), streams{stream.id()} {}

  bool checking() const { return static_cast<bool>(sink); }

  // Records a node. Tensors whose memory lives outside the graph's pool are kept alive
  // for as long as the graph (replay reads and writes them); memory of the pool is left
  // to the pool, so a block freed during capture is reused by later recorded work, in
  // the order replay follows, as on real hardware.
  void add_node(GraphNode node, std::vector<at::Tensor> keep) {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return;
    nodes.push_back(std::move(node));
    for (auto& t : keep) {
      // Absent optional tensors (a conv without bias, a gradient masked out) own nothing.
      if (!t.defined()) continue;
      const void* base = t.storage().data();
      if (base != nullptr && pool_of_ptr(base) == pool) continue;
      keep_alive.push_back(std::move(t));
    }
  }

  const uint64_t id;
  const int64_t pool;
  const c10::DeviceIndex device;
  const std::thread::id owner;
  const CaptureErrorMode mode;
  const CaptureProblemSink sink;
  std::vector<c10::StreamId> streams;  // guarded by the registry lock
  std::mutex mu;                       // guards what follows
  std::vector<GraphNode> nodes;
  std::vector<at::Tensor> keep_alive;
  std::string abort_reason;
  bool aborted = false;
};

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

// Ends `c` because of `message`: nothing it recorded survives, its stream runs work again,
// and its graph's capture_end() reports the reason.
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

void report(const std::shared_ptr<GraphCapture>& c, const std::string& kind, const std::string& op,
            const std::string& detail) {
  c->sink(CaptureProblem{kind, op, detail});
}

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

std::optional<size_t> aliased_argument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* ret_alias = schema.returns()[ret].alias_info();
  if (ret_alias == nullptr) return std::nullopt;
  const auto& args = schema.arguments();
  for (size_t j = 0; j < args.size(); ++j) {
    const auto* a = args[j].alias_info();
    if (a == nullptr) continue;
    for (const auto& sym : ret_alias->beforeSets()) {
      if (a->beforeSets().count(sym)) return j;
    }
  }
  return std::nullopt;
}

// The out= overload of a functional operator whose leading arguments are the operator's
// own and whose trailing arguments are one written tensor per return; replaying through
// it writes straight into the graph's output memory instead of allocating and copying.
std::optional<c10::OperatorHandle> out_overload(const c10::FunctionSchema& schema) {
  if (schema.overload_name() == "out") return std::nullopt;
  auto out = c10::Dispatcher::singleton().findSchema({schema.name(), "out"});
  if (!out.has_value()) return std::nullopt;
  const auto& out_schema = out->schema();
  const auto& args = schema.arguments();
  const auto& out_args = out_schema.arguments();
  const size_t num_returns = schema.returns().size();
  if (out_args.size() != args.size() + num_returns || out_schema.returns().size() != num_returns) {
    return std::nullopt;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (out_args[i].name() != args[i].name() || *out_args[i].type() != *args[i].type()) return std::nullopt;
  }
  for (size_t i = args.size(); i < out_args.size(); ++i) {
    const auto* alias = out_args[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || out_args[i].type()->kind() != c10::TypeKind::TensorType) {
      return std::nullopt;
    }
  }
  return out;
}

at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined() || t.device().is_meta()) return t;
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / std::max<size_t>(1, t.element_size()));
  at::Tensor base = at::empty({storage_elems}, at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(const c10::IValue& iv) {
  if (iv.isTensor()) return meta_like(iv.toTensor());
  if (iv.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : iv.toTensorList()) out.push_back(meta_like(t));
    return out;
  }
  if (iv.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(meta_like(*t)) : std::nullopt);
    }
    return out;
  }
  if (iv.isDevice()) return c10::IValue(c10::Device(c10::kMeta));
  return iv;
}

// Output geometry of the matrix products (and of their out= forms), whose meta kernels are PyTorch's Python
// decompositions: running one imports torch._dynamo on first use (a `_disable_dynamo`
// wrapper), and capturing eager work must not load the compiler stack. Only consistent
// shapes are answered here; anything else goes to the meta kernel, which raises as eager
// would.
std::optional<torch::jit::Stack> native_meta(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  // The functional ops reach the device as their out= overloads (structured kernels).
  if (!schema.overload_name().empty() && schema.overload_name() != "out") return std::nullopt;
  const std::string& name = schema.name();
  auto tensor = [&](size_t i) -> const at::Tensor* {
    return i < args.size() && args[i].isTensor() ? &args[i].toTensor() : nullptr;
  };
  auto result = [](std::vector<int64_t> sizes, const at::Tensor& like) {
    torch::jit::Stack out;
    out.emplace_back(at::empty(sizes, at::TensorOptions().dtype(like.scalar_type()).device(at::kMeta)));
    return out;
  };
  size_t first = 0;  // index of the first matrix operand
  if (name == "aten::addmm" || name == "aten::baddbmm" || name == "aten::addmv") first = 1;
  else if (name != "aten::mm" && name != "aten::bmm" && name != "aten::mv") return std::nullopt;
  const at::Tensor* a = tensor(first);
  const at::Tensor* b = tensor(first + 1);
  if (a == nullptr || b == nullptr || a->scalar_type() != b->scalar_type()) return std::nullopt;
  if (first == 1) {
    const at::Tensor* self = tensor(0);
    if (self == nullptr || self->scalar_type() != a->scalar_type()) return std::nullopt;
  }
  if (name == "aten::mm" || name == "aten::addmm") {
    if (a->dim() != 2 || b->dim() != 2 || a->size(1) != b->size(0)) return std::nullopt;
    if (first == 1 && !at::is_expandable_to(tensor(0)->sizes(), {a->size(0), b->size(1)})) return std::nullopt;
    return result({a->size(0), b->size(1)}, *a);
  }
  if (name == "aten::bmm" || name == "aten::baddbmm") {
    if (a->dim() != 3 || b->dim() != 3 || a->size(0) != b->size(0) || a->size(2) != b->size(1)) return std::nullopt;
    if (first == 1 && !at::is_expandable_to(tensor(0)->sizes(), {a->size(0), a->size(1), b->size(2)})) {
      return std::nullopt;
    }
    return result({a->size(0), a->size(1), b->size(2)}, *a);
  }
  // mv, addmv
  if (a->dim() != 2 || b->dim() != 1 || a->size(1) != b->size(0)) return std::nullopt;
  if (first == 1 && !at::is_expandable_to(tensor(0)->sizes(), {a->size(0)})) return std::nullopt;
  return result({a->size(0)}, *a);
}

// True when `op`'s meta kernel is written in Python (one of PyTorch's decompositions).
bool meta_kernel_is_python(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<std::string, bool> known;
  const std::string key = c10::toString(op.operator_name());
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool python = false;
  const std::string table = op.dumpComputedTable();
  size_t at = table.find("\nMeta: ");
  if (at == std::string::npos && table.rfind("Meta: ", 0) == 0) at = 0;
  if (at != std::string::npos) {
    size_t end = table.find('\n', at + 1);
    python = table.substr(at, end == std::string::npos ? std::string::npos : end - at).find(".py:") != std::string::npos;
  }
  known.emplace(key, python);
  return python;
}

bool compiler_stack_loaded() {
  if (!Py_IsInitialized()) return false;
  PyGILState_STATE gil = PyGILState_Ensure();
  bool loaded = PyDict_GetItemString(PyImport_GetModuleDict(), "torch._dynamo") != nullptr;
  PyGILState_Release(gil);
  return loaded;
}

at::Tensor scratch_like(const at::Tensor& t) {
  if (!t.defined()) return t;
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / std::max<size_t>(1, t.element_size()));
  return at::zeros({storage_elems}, at::TensorOptions().dtype(t.scalar_type()))
      .as_strided(t.sizes(), t.strides(), t.storage_offset());
}

at::Tensor meta_of_result(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
}

// Output geometry of an operator whose meta kernel is Python, computed by its CPU kernel on
// zero-filled scratch copies of the arguments: PyTorch's Python decompositions import
// torch._dynamo on first use, and capturing eager work must not load the compiler stack.
// Operators whose output shape depends on values, or that draw random numbers, are left to
// the meta kernel; so is anything the scratch run rejects.
std::optional<torch::jit::Stack> scratch_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  if (op.hasTag(at::Tag::dynamic_output_shape) || op.hasTag(at::Tag::data_dependent_output) ||
      op.hasTag(at::Tag::nondeterministic_seeded)) {
    return std::nullopt;
  }
  for (const auto& a : op.schema().arguments()) {
    if (a.type()->kind() == c10::TypeKind::GeneratorType) return std::nullopt;
    if (auto opt = a.type()->cast<c10::OptionalType>()) {
      if (opt->getElementType()->kind() == c10::TypeKind::GeneratorType) return std::nullopt;
    }
  }
  if (!meta_kernel_is_python(op) || compiler_stack_loaded()) return std::nullopt;
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const auto& iv : args) {
    if (iv.isTensor()) {
      stack.emplace_back(scratch_like(iv.toTensor()));
    } else if (iv.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : iv.toTensorList()) list.push_back(scratch_like(t));
      stack.emplace_back(list);
    } else if (iv.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(scratch_like(*t)) : std::nullopt);
      }
      stack.emplace_back(list);
    } else {
      stack.push_back(iv);
    }
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  for (auto& iv : stack) {
    if (iv.isTensor()) {
      iv = meta_of_result(iv.toTensor());
    } else if (iv.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : iv.toTensorList()) list.push_back(meta_of_result(t));
      iv = list;
    }
  }
  return stack;
}

// The first line of an error's message (backtraces and notes left out).
std::string first_line(const char* what) {
  std::string msg(what);
  size_t end = msg.find('\n');
  return end == std::string::npos ? msg : msg.substr(0, end);
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
      report(c, "host sync", what, host_sync_message(what));
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
      report(waited, "host sync", what, host_sync_message(what));
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
      report(own, "host sync", what, host_sync_message(what));
      return;
    }
    abort_capture(own, host_sync_message(what));
  }
  check_not_capturing(what);
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

bool record_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu, c10::DeviceIndex device) {
  auto capture = active_capture();
  TORCH_INTERNAL_ASSERT(capture != nullptr);
  const bool checking = capture->checking();
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t begin = stack->size() - num_args;
  std::vector<c10::IValue> cpu_args(stack->begin() + begin, stack->end());

  // Refused aliasing raises now, as the issuing of a CUDA kernel does, not at replay; and
  // before any shape error, as ATen checks overlap first. (A check run runs the operator,
  // which raises by itself.)
  if (!checking) {
    if (auto refusal = capture_overlap_refusal(op, cpu_args)) abort_capture(capture, *refusal);
  }
  torch::jit::Stack meta_stack;
  try {
    if (auto native = native_meta(schema, cpu_args)) {
      meta_stack = std::move(*native);
    } else if (auto scratch = scratch_meta(op, cpu_args)) {
      meta_stack = std::move(*scratch);
    } else {
      meta_stack.reserve(num_args);
      for (const auto& iv : cpu_args) meta_stack.push_back(to_meta(iv));
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
    }
  } catch (const std::exception& e) {
    // A meta kernel that raises: either the output shape depends on values (nonzero,
    // boolean masks, unique) or there is no meta kernel at all.
    const std::string reason = first_line(e.what());
    const bool missing = !op.hasTag(at::Tag::dynamic_output_shape) &&
                         (reason.find("Could not run") != std::string::npos ||
                          reason.find("NotImplemented") != std::string::npos);
    std::string message = "NPU graph capture cannot record " + schema.name() + ": " +
                          (missing ? "it has no shape function (meta kernel), so its output shape is not known "
                                     "without running it ("
                                   : "its output shape depends on the values it computes (") +
                          reason + "). The capture was aborted; run this operator outside the captured region.";
    if (checking) {
      report(capture, missing ? "unsupported op" : "dynamic output shape", schema.name(), message);
      return false;
    }
    abort_capture(capture, message);
  }
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    const c10::IValue& meta_out = meta_stack[r];
    if (!meta_out.isTensor() && !meta_out.isTensorList()) {
      std::string message = "NPU graph capture cannot record " + schema.name() +
                            ": it returns a host value, which needs the host to wait for the npu. The "
                            "capture was aborted; run this operator outside the captured region.";
      if (checking) {
        report(capture, "host value", schema.name(), message);
        return false;
      }
      abort_capture(capture, message);
    }
  }
  if (checking) return false;

  // Map CPU aliases back to their npu tensors (updated when an out= argument is resized).
  std::vector<std::pair<at::Tensor, at::Tensor>> aliases(npu_to_cpu);
  auto npu_of = [&](const c10::IValue& cpu_iv) -> at::Tensor {
    if (!cpu_iv.isTensor()) return at::Tensor();
    const at::Tensor& t = cpu_iv.toTensor();
    for (const auto& m : aliases) {
      if (m.second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return m.first;
    }
    return at::Tensor();
  };
  // After `npu` was resized, the recorded arguments over its storage (itself and the
  // other views of that storage) must alias its new memory, through one CPU storage again.
  auto refresh_aliases_of = [&](const at::Tensor& npu) {
    CpuAliasSet fresh_aliases;
    for (auto& m : aliases) {
      if (!m.first.storage().is_alias_of(npu.storage())) continue;
      at::Tensor fresh = fresh_aliases.alias(m.first);
      auto replace = [&](at::Tensor& t) {
        if (t.defined() && t.unsafeGetTensorImpl() == m.second.unsafeGetTensorImpl()) t = fresh;
      };
      for (auto& iv : cpu_args) {
        if (iv.isTensor()) {
          at::Tensor t = iv.toTensor();
          replace(t);
          iv = t;
        } else if (iv.isTensorList()) {
          std::vector<at::Tensor> list = iv.toTensorList().vec();
          for (auto& t : list) replace(t);
          iv = c10::List<at::Tensor>(list);
        } else if (iv.isOptionalTensorList()) {
          c10::List<std::optional<at::Tensor>> list;
          for (std::optional<at::Tensor> t : iv.toOptionalTensorList()) {
            if (t.has_value()) replace(*t);
            list.push_back(t);
          }
          iv = list;
        }
      }
      m.second = fresh;
    }
  };

  const size_t num_returns = schema.returns().size();
  std::vector<c10::IValue> results;
  std::vector<std::pair<size_t, at::Tensor>> output_slots;  // return index -> CPU alias of pool output
  std::vector<at::Tensor> keep;
  results.reserve(num_returns);
  for (size_t r = 0; r < num_returns; ++r) {
    const c10::IValue& meta_out = meta_stack[r];
    auto aliased = aliased_argument(schema, r);
    if (meta_out.isTensor()) {
      const at::Tensor& m = meta_out.toTensor();
      if (aliased.has_value()) {
        at::Tensor base = npu_of(cpu_args[*aliased]);
        TORCH_CHECK(base.defined(), "NPU graph capture: ", schema.name(), " returns an alias of a non-npu input");
        if (schema.returns()[r].alias_info()->isWrite()) {
          if (base.sizes() != m.sizes()) {
            // An out= argument the operator resizes (torch.arange(4) writes into an empty
            // tensor): it gets its new memory now, and replay must write into that memory,
            // not into the buffer the CPU alias was made over before the resize.
            base.resize_(m.sizes());
            refresh_aliases_of(base);
          }
          results.emplace_back(base);
        } else {
          auto view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(base.storage()),
                                                                c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                                base.dtype());
          view.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes(), m.strides(), m.storage_offset());
          results.emplace_back(view);
        }
        continue;
      }
      at::Tensor out = at::empty_strided(m.sizes(), m.strides(),
                                         at::TensorOptions().dtype(m.scalar_type()).device(kNpu, device));
      keep.push_back(out);
      output_slots.emplace_back(r, cpu_alias(out));
      results.emplace_back(out);
    } else {
      TORCH_CHECK(!aliased.has_value(), "NPU graph capture cannot record ", schema.name(),
                  ": it returns views as a list");
      c10::List<at::Tensor> outs;
      std::vector<at::Tensor> list_aliases;
      for (const at::Tensor& m : meta_out.toTensorList()) {
        at::Tensor out = at::empty_strided(m.sizes(), m.strides(),
                                           at::TensorOptions().dtype(m.scalar_type()).device(kNpu, device));
        keep.push_back(out);
        outs.push_back(out);
        list_aliases.push_back(cpu_alias(out));
      }
      // Lists are stored as one slot per element, encoded after the tensors.
      for (size_t k = 0; k < list_aliases.size(); ++k) output_slots.emplace_back(r * 1000000 + k + 1, list_aliases[k]);
      results.emplace_back(outs);
    }
  }
  for (const auto& m : aliases) keep.push_back(m.first);

  // What the node reads and writes, for the observers of its replays.
  std::vector<c10::IValue> npu_args;
  npu_args.reserve(num_args);
  for (const auto& iv : cpu_args) {
    if (iv.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : iv.toTensorList()) list.push_back(npu_of(c10::IValue(t)));
      npu_args.emplace_back(list);
    } else {
      npu_args.push_back(iv.isTensor() ? c10::IValue(npu_of(iv)) : iv);
    }
  }
  std::vector<observe::TensorAccess> accesses = observe::operator_accesses(schema, npu_args.data(), num_args);
  for (const auto& r : results) {
    if (r.isTensor()) observe::add_access(accesses, r.toTensor(), true, true, "");
  }

  // Generator arguments are looked up again at every replay so graph-safe state swaps apply.
  std::vector<std::pair<size_t, at::Generator>> generators;
  for (size_t i = 0; i < num_args; ++i) {
    if (cpu_args[i].isGenerator()) generators.emplace_back(i, default_generator(device));
  }
  // The fallback replaced the npu generator by its backing CPU generator; remember the npu one.
  // (An explicitly passed npu generator is found by matching its backing generator.)
  for (auto& g : generators) {
    const at::Generator& cpu_gen = cpu_args[g.first].toGenerator();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      if (backing_cpu_generator(default_generator(d)).unsafeGetGeneratorImpl() == cpu_gen.unsafeGetGeneratorImpl()) {
        g.second = default_generator(d);
      }
    }
    if (backing_cpu_generator(g.second).unsafeGetGeneratorImpl() != cpu_gen.unsafeGetGeneratorImpl()) {
      g.second = at::Generator();  // a user generator: keep the CPU generator it had
    }
  }

  // Functional operators with a matching out= overload replay into their outputs directly.
  bool all_outputs_fresh = output_slots.size() == num_returns;
  for (size_t r = 0; r < output_slots.size() && all_outputs_fresh; ++r) {
    all_outputs_fresh = output_slots[r].first == r;
  }
  std::optional<c10::OperatorHandle> out_op = all_outputs_fresh ? out_overload(schema) : std::nullopt;
  GraphNode node;
  if (out_op.has_value()) {
    std::vector<c10::IValue> out_args(cpu_args);
    for (const auto& slot : output_slots) out_args.emplace_back(slot.second);
    c10::OperatorHandle out_handle = *out_op;
    node.native = [out_handle, out_args, generators]() {
      torch::jit::Stack s(out_args.begin(), out_args.end());
      for (const auto& g : generators) {
        if (g.second.defined()) s[g.first] = c10::IValue(backing_cpu_generator(g.second));
      }
      redispatch_to_cpu_kernel(out_handle, c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
    };
  } else {
    c10::OperatorHandle handle = op;
    node.native = [handle, cpu_args, output_slots, generators, num_returns]() {
      torch::jit::Stack s(cpu_args.begin(), cpu_args.end());
      for (const auto& g : generators) {
        if (g.second.defined()) s[g.first] = c10::IValue(backing_cpu_generator(g.second));
      }
      redispatch_to_cpu_kernel(handle, c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
      for (const auto& slot : output_slots) {
        if (slot.first < 1000000 && slot.first < num_returns && s[slot.first].isTensor()) {
          at::Tensor dst = slot.second;
          dst.copy_(s[slot.first].toTensor());
        } else {
          size_t r = slot.first / 1000000;
          size_t k = slot.first % 1000000 - 1;
          at::Tensor dst = slot.second;
          dst.copy_(s[r].toTensorList().get(k));
        }
      }
    };
  }
  // Each replay of the node announces it to the profiler and the stream sanitizer.
  node.native = observe::replayed_node(schema.name(), device, std::move(accesses), std::move(node.native));
  capture->add_node(std::move(node), std::move(keep));
  stack->erase(stack->begin() + begin, stack->end());
  for (auto& r : results) stack->push_back(std::move(r));
  return true;
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
