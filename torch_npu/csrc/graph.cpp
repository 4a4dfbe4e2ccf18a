// NPU graph capture and replay.
//
// While a graph captures on a thread, operators on npu tensors are recorded instead of
// run: output shapes come from the operators' meta kernels, output memory comes from the
// graph's private pool, and replay later runs the recorded CPU kernels on exactly that
// memory. Anything that needs the host to wait for the device aborts the capture.
#include "npu_runtime.h"

#include <ATen/ops/empty_strided.h>

namespace torch_npu {

class GraphCapture {
 public:
  explicit GraphCapture(int64_t pool) : pool(pool), previous_pool(exchange_capture_pool(pool)) {}
  // Restores the allocation pool once the capture ends or is aborted.
  void leave() {
    if (!left) exchange_capture_pool(previous_pool);
    left = true;
  }
  // Records a node. Tensors whose memory lives outside the graph's pool are kept alive
  // for as long as the graph (replay reads and writes them); memory of the pool is left
  // to the pool, so a block freed during capture is reused by later recorded work, in
  // the order replay follows, as on real hardware.
  void add_node(std::function<void()> fn, std::vector<at::Tensor> keep) {
    std::lock_guard<std::mutex> lock(mu);
    nodes.push_back(std::move(fn));
    for (auto& t : keep) {
      // Absent optional tensors (a conv without bias, a gradient masked out) own nothing.
      if (!t.defined()) continue;
      const void* base = t.storage().data();
      if (base != nullptr && pool_of_ptr(base) == pool) continue;
      keep_alive.push_back(std::move(t));
    }
  }
  std::mutex mu;
  int64_t pool;
  int64_t previous_pool;
  bool left = false;
  std::vector<std::function<void()>> nodes;
  std::vector<at::Tensor> keep_alive;
  std::string abort_reason;
};

namespace {

// The capture in progress, if any. Capture is process-wide (like CUDA's global capture
// mode): autograd runs backward on a device thread, whose work must be recorded too.
std::atomic<GraphCapture*> tls_capture{nullptr};

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

[[noreturn]] void abort_capture(const std::string& message) {
  GraphCapture* c = tls_capture;
  if (c != nullptr) {
    c->abort_reason = message;
    c->nodes.clear();
    c->leave();
    tls_capture = nullptr;
  }
  TORCH_CHECK(false, message);
}

}  // namespace

GraphCapture* active_capture() { return tls_capture; }

void check_not_capturing(const char* what) {
  if (tls_capture == nullptr) return;
  abort_capture(std::string(what) +
                " needs the host to wait for the npu, which is not allowed while an NPU graph is being "
                "captured. The capture was aborted; move this call outside the captured region.");
}

void record_host_call(std::function<void()> fn, std::vector<at::Tensor> keep) {
  GraphCapture* capture = tls_capture;
  TORCH_INTERNAL_ASSERT(capture != nullptr);
  capture->add_node(std::move(fn), std::move(keep));
}

void record_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu, c10::DeviceIndex device) {
  GraphCapture* capture = tls_capture;
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t begin = stack->size() - num_args;
  std::vector<c10::IValue> cpu_args(stack->begin() + begin, stack->end());

  torch::jit::Stack meta_stack;
  meta_stack.reserve(num_args);
  for (const auto& iv : cpu_args) meta_stack.push_back(to_meta(iv));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
  } catch (const c10::Error& e) {
    abort_capture("NPU graph capture cannot record " + schema.name() +
                  ": its output shape is not known without running it (data-dependent output or no "
                  "shape function: " + e.what_without_backtrace() +
                  "). The capture was aborted; run this operator outside the captured region.");
  }

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

  // After `npu` was resized, the recorded arguments must alias its new memory.
  auto refresh_aliases_of = [&](const at::Tensor& npu) {
    for (auto& m : aliases) {
      if (m.first.unsafeGetTensorImpl() != npu.unsafeGetTensorImpl()) continue;
      at::Tensor fresh = cpu_alias(npu);
      for (auto& iv : cpu_args) {
        if (iv.isTensor() && iv.toTensor().unsafeGetTensorImpl() == m.second.unsafeGetTensorImpl()) iv = fresh;
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
    } else if (meta_out.isTensorList()) {
      TORCH_CHECK(!aliased.has_value(), "NPU graph capture cannot record ", schema.name(),
                  ": it returns views as a list");
      c10::List<at::Tensor> outs;
      std::vector<at::Tensor> aliases;
      for (const at::Tensor& m : meta_out.toTensorList()) {
        at::Tensor out = at::empty_strided(m.sizes(), m.strides(),
                                           at::TensorOptions().dtype(m.scalar_type()).device(kNpu, device));
        keep.push_back(out);
        outs.push_back(out);
        aliases.push_back(cpu_alias(out));
      }
      // Lists are stored as one slot per element, encoded after the tensors.
      for (size_t k = 0; k < aliases.size(); ++k) output_slots.emplace_back(r * 1000000 + k + 1, aliases[k]);
      results.emplace_back(outs);
    } else {
      abort_capture("NPU graph capture cannot record " + schema.name() +
                    ": it returns a host value, which needs the host to wait for the npu");
    }
  }
  for (const auto& m : npu_to_cpu) keep.push_back(m.first);

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
  if (out_op.has_value()) {
    std::vector<c10::IValue> out_args(cpu_args);
    for (const auto& slot : output_slots) out_args.emplace_back(slot.second);
    c10::OperatorHandle out_handle = *out_op;
    capture->add_node([out_handle, out_args, generators]() {
      torch::jit::Stack s(out_args.begin(), out_args.end());
      for (const auto& g : generators) {
        if (g.second.defined()) s[g.first] = c10::IValue(backing_cpu_generator(g.second));
      }
      out_handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
    }, std::move(keep));
    stack->erase(stack->begin() + begin, stack->end());
    for (auto& r : results) stack->push_back(std::move(r));
    return;
  }

  c10::OperatorHandle handle = op;
  capture->add_node([handle, cpu_args, output_slots, generators, num_returns]() {
    torch::jit::Stack s(cpu_args.begin(), cpu_args.end());
    for (const auto& g : generators) {
      if (g.second.defined()) s[g.first] = c10::IValue(backing_cpu_generator(g.second));
    }
    handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
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
  }, std::move(keep));

  stack->erase(stack->begin() + begin, stack->end());
  for (auto& r : results) stack->push_back(std::move(r));
}

// ---- graphs ------------------------------------------------------------------

NpuGraph::NpuGraph() = default;
NpuGraph::~NpuGraph() {
  try {
    reset();
  } catch (...) {
  }
}

void NpuGraph::capture_begin(int64_t pool) {
  TORCH_CHECK(tls_capture == nullptr, "An NPU graph capture is already in progress; "
              "end it with capture_end() before starting another");
  TORCH_CHECK(nodes_.empty() && !capture_, "This NPUGraph already holds a capture; call reset() before "
              "capturing again");
  lazy_init();
  pool_ = pool != 0 ? pool : new_pool_id();
  retain_pool(pool_);
  capture_ = std::make_unique<GraphCapture>(pool_);
  tls_capture = capture_.get();
}

void NpuGraph::capture_end() {
  TORCH_CHECK(capture_ != nullptr, "capture_end() called without capture_begin()");
  if (tls_capture == capture_.get()) tls_capture = nullptr;
  capture_->leave();
  abort_reason_ = capture_->abort_reason;
  nodes_ = std::move(capture_->nodes);
  keep_alive_ = std::move(capture_->keep_alive);
  capture_.reset();
  captured_ = abort_reason_.empty();
}

void NpuGraph::replay() {
  TORCH_CHECK(abort_reason_.empty(), "This NPUGraph cannot be replayed: its capture was aborted (",
              abort_reason_, ")");
  TORCH_CHECK(captured_, "NPUGraph.replay() needs a finished capture (capture_begin/capture_end)");
  TORCH_CHECK(tls_capture == nullptr, "NPUGraph.replay() cannot run while another graph is being captured");
  for (auto& node : nodes_) node();
}

void NpuGraph::reset() {
  if (capture_ && tls_capture == capture_.get()) tls_capture = nullptr;
  if (capture_) capture_->leave();
  capture_.reset();
  nodes_.clear();
  keep_alive_.clear();
  abort_reason_.clear();
  captured_ = false;
  if (pool_ != 0) {
    release_pool(pool_);
    pool_ = 0;
  }
}

int64_t graph_pool_handle() { return new_pool_id(); }

}  // namespace torch_npu
