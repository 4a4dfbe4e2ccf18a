// Recording one operator call into an NPU graph capture (record_operator of capture.h).
//
// A call is recorded in phases, each a method of OperatorRecording below: refuse a
// generator the graph does not know; refuse the aliasing its CPU kernel would refuse; find
// its output geometry without running it (meta_shapes.h); refuse host values among its
// returns; give its outputs npu memory of the graph's pool (or, for a return that aliases
// an argument, that argument); note the tensors it reads and writes for the observers of
// its replays; and build the replayed call, through the out= overload where one writes
// straight into the outputs. A replayed random call draws from its npu generator at that
// generator's offset of the replay and advances it, as the eager call would.
#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/cuda_dtype_widening.h"
#include "torch_npu/csrc/aten/random_draws.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/graphs/graph_capture.h"
#include "torch_npu/csrc/graphs/meta_shapes.h"
#include "torch_npu/csrc/graphs/npu_graph.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/generator.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_npu {
namespace {

// Where a recorded output is among the operator's returns: return `ret` itself (a Tensor
// return), or element `element` of return `ret` (a Tensor[] return).
struct OutputSlot {
  size_t ret;
  std::optional<size_t> element;
  at::Tensor cpu_alias;  // over the pool memory replay writes the output into
};

// The output `slot` names in `returns`, the stack a call of the operator left.
at::Tensor output_in(const OutputSlot& slot, const torch::jit::Stack& returns) {
  const c10::IValue& ret = returns[slot.ret];
  return slot.element.has_value() ? ret.toTensorList().get(*slot.element) : ret.toTensor();
}

// Runs `call` on `stack`, the recorded call's arguments, with the generator argument (if
// any) drawing from its npu generator at that generator's offset now.
void run_drawing(torch::jit::Stack& stack, const GeneratorArguments& generators, std::optional<uint64_t> max_values,
                 const std::function<void(torch::jit::Stack&)>& call) {
  if (generators.empty()) {
    call(stack);
    return;
  }
  const auto& [index, npu_gen] = generators.front();
  draw_from(npu_gen, max_values, [&](const at::Generator& engine) {
    stack[index] = c10::IValue(engine);
    call(stack);
  });
}

// The argument a return aliases (`Tensor(a)` / `Tensor(a!)` in the schema), if any.
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

// The first line of an error's message (backtraces and notes left out).
std::string first_line(const char* what) {
  std::string msg(what);
  size_t end = msg.find('\n');
  return end == std::string::npos ? msg : msg.substr(0, end);
}

// One operator call being recorded: its CPU arguments, the npu tensors they alias, and
// what the phases have made of it so far.
class OperatorRecording {
 public:
  OperatorRecording(std::shared_ptr<GraphCapture> capture, const c10::OperatorHandle& op,
                    std::vector<c10::IValue> cpu_args, const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu,
                    c10::DeviceIndex device)
      : capture_(std::move(capture)),
        op_(op),
        schema_(op.schema()),
        device_(device),
        cpu_args_(std::move(cpu_args)),
        aliases_(npu_to_cpu) {}

  // Refused aliasing raises now, as the issuing of a CUDA kernel does, not at replay; and
  // before any shape error, as ATen checks overlap first. (A check run runs the operator,
  // which raises by itself.)
  void refuse_overlap() {
    if (auto refusal = capture_overlap_refusal(op_, cpu_args_)) abort_capture(capture_, *refusal);
  }

  // The outputs as meta tensors; nullopt when a check run reported why there are none.
  std::optional<torch::jit::Stack> output_geometry() {
    try {
      return meta_outputs(op_, cpu_args_);
    } catch (const std::exception& e) {
      // Either the output shape depends on values (nonzero, boolean masks, unique) or
      // there is no meta kernel: the operator has none, or its composite kernel calls an
      // operator that has none, for which the dispatcher raises NotImplementedError.
      const std::string reason = first_line(e.what());
      const bool missing = !op_.hasTag(at::Tag::dynamic_output_shape) &&
                           (!has_meta_kernel(op_) || dynamic_cast<const c10::NotImplementedError*>(&e) != nullptr);
      std::string message = "NPU graph capture cannot record " + schema_.name() + ": " +
                            (missing ? "it has no shape function (meta kernel), so its output shape is not known "
                                       "without running it ("
                                     : "its output shape depends on the values it computes (") +
                            reason + "). The capture was aborted; run this operator outside the captured region.";
      refuse(missing ? "unsupported op" : "dynamic output shape", message);
      return std::nullopt;
    }
  }

  // False (after a check run reported it) when a return is a host value.
  bool returns_only_tensors(const torch::jit::Stack& meta) {
    for (size_t r = 0; r < schema_.returns().size(); ++r) {
      if (meta[r].isTensor() || meta[r].isTensorList()) continue;
      refuse("host value", "NPU graph capture cannot record " + schema_.name() +
                               ": it returns a host value, which needs the host to wait for the npu. The capture "
                               "was aborted; run this operator outside the captured region.");
      return false;
    }
    return true;
  }

  // The npu outputs, of the geometry `meta` gives: fresh memory of the graph's pool, or the
  // argument a return aliases (resized first where the operator resizes an out= argument).
  void allocate_outputs(const torch::jit::Stack& meta) {
    const size_t num_returns = schema_.returns().size();
    results_.reserve(num_returns);
    for (size_t r = 0; r < num_returns; ++r) {
      auto aliased = aliased_argument(schema_, r);
      if (meta[r].isTensor()) {
        const at::Tensor& m = meta[r].toTensor();
        if (aliased.has_value()) {
          results_.emplace_back(aliasing_output(r, *aliased, m));
          continue;
        }
        at::Tensor out = pool_tensor(m);
        slots_.push_back(OutputSlot{r, std::nullopt, cpu_alias(out)});
        results_.emplace_back(out);
      } else {
        TORCH_CHECK(!aliased.has_value(), "NPU graph capture cannot record ", schema_.name(),
                    ": it returns views as a list");
        c10::List<at::Tensor> outs;
        size_t k = 0;
        for (const at::Tensor& m : meta[r].toTensorList()) {
          at::Tensor out = pool_tensor(m);
          outs.push_back(out);
          slots_.push_back(OutputSlot{r, k++, cpu_alias(out)});
        }
        results_.emplace_back(outs);
      }
    }
    for (const auto& m : aliases_) keep_.push_back(m.first);
  }

  // What the node reads and writes, for the observers of its replays.
  std::vector<observe::TensorAccess> accesses() const {
    const size_t num_args = cpu_args_.size();
    std::vector<c10::IValue> npu_args;
    npu_args.reserve(num_args);
    for (const auto& iv : cpu_args_) {
      if (iv.isTensorList()) {
        c10::List<at::Tensor> list;
        for (const at::Tensor& t : iv.toTensorList()) list.push_back(npu_of(c10::IValue(t)));
        npu_args.emplace_back(list);
      } else {
        npu_args.push_back(iv.isTensor() ? c10::IValue(npu_of(iv)) : iv);
      }
    }
    std::vector<observe::TensorAccess> accesses = observe::operator_accesses(schema_, npu_args.data(), num_args);
    for (const auto& r : results_) {
      if (r.isTensor()) observe::add_access(accesses, r.toTensor(), true, true, "");
    }
    return accesses;
  }

  // False when a generator argument is neither a default generator nor registered with the
  // graph: as on CUDA, such a generator cannot be drawn from in a capture. A capture raises
  // and goes on (nothing was recorded); a check run reports it and runs the call.
  bool generators_registered(const GeneratorArguments& generators) {
    for (const auto& g : generators) {
      if (is_default_generator(g.second)) continue;
      bool registered = false;
      for (const auto& r : capture_->registered_generators) {
        registered = registered || r.unsafeGetGeneratorImpl() == g.second.unsafeGetGeneratorImpl();
      }
      if (registered) continue;
      const std::string message =
          "NPU graph capture cannot record " + schema_.name() + ": it draws from an npu generator that is not "
          "registered with the graph being captured, whose replays could not advance that generator. Call "
          "graph.register_generator_state(generator) before capture_begin() (the default generators need no "
          "registration), or draw from the default generator. The capture itself goes on.";
      if (capture_->checking()) {
        report_capture_problem(capture_, "unregistered generator", schema_.name(), message);
        return false;
      }
      TORCH_CHECK(false, message);
    }
    return true;
  }

  // The replayed call: through the out= overload when every return is a fresh output (a
  // functional operator), else the operator itself, its outputs copied into the pool memory.
  std::function<void()> replayed_call(GeneratorArguments generators) const {
    bool all_outputs_fresh = slots_.size() == schema_.returns().size();
    for (size_t r = 0; r < slots_.size() && all_outputs_fresh; ++r) {
      all_outputs_fresh = !slots_[r].element.has_value() && slots_[r].ret == r;
    }
    const std::optional<uint64_t> max_values =
        generators.empty() ? std::nullopt : max_values_drawn(op_, cpu_args_.data(), cpu_args_.size());
    std::optional<c10::OperatorHandle> out_op = all_outputs_fresh ? out_overload(schema_) : std::nullopt;
    if (out_op.has_value()) {
      std::vector<c10::IValue> out_args(cpu_args_);
      for (const auto& slot : slots_) out_args.emplace_back(slot.cpu_alias);
      c10::OperatorHandle out_handle = *out_op;
      return [out_handle, out_args, generators, max_values]() {
        torch::jit::Stack s(out_args.begin(), out_args.end());
        run_drawing(s, generators, max_values, [&](torch::jit::Stack& stack) {
          redispatch_to_cpu_kernel(out_handle, c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
        });
      };
    }
    c10::OperatorHandle handle = op_;
    return [handle, cpu_args = cpu_args_, slots = slots_, generators, max_values]() {
      torch::jit::Stack s(cpu_args.begin(), cpu_args.end());
      run_drawing(s, generators, max_values, [&](torch::jit::Stack& stack) {
        redispatch_to_cpu_kernel(handle, c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
      });
      for (const auto& slot : slots) {
        at::Tensor dst = slot.cpu_alias;
        dst.copy_(output_in(slot, s));
      }
    };
  }

  std::vector<c10::IValue> take_results() { return std::move(results_); }
  std::vector<at::Tensor> take_keep() { return std::move(keep_); }

 private:
  // Refuses the call: a check run reports `message` as a problem of `kind`, a capture aborts.
  void refuse(const std::string& kind, const std::string& message) {
    if (capture_->checking()) {
      report_capture_problem(capture_, kind, schema_.name(), message);
      return;
    }
    abort_capture(capture_, message);
  }

  // The npu tensor whose CPU alias `cpu_iv` is (undefined for anything else).
  at::Tensor npu_of(const c10::IValue& cpu_iv) const {
    if (!cpu_iv.isTensor()) return at::Tensor();
    const at::Tensor& t = cpu_iv.toTensor();
    for (const auto& m : aliases_) {
      if (m.second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return m.first;
    }
    return at::Tensor();
  }

  // A fresh npu output of the geometry of `m`, from the graph's pool.
  at::Tensor pool_tensor(const at::Tensor& m) {
    at::Tensor out =
        at::empty_strided(m.sizes(), m.strides(), at::TensorOptions().dtype(m.scalar_type()).device(kNpu, device_));
    keep_.push_back(out);
    return out;
  }

  // Return `r`, which aliases argument `arg`, with the geometry of `m`.
  at::Tensor aliasing_output(size_t r, size_t arg, const at::Tensor& m) {
    at::Tensor base = npu_of(cpu_args_[arg]);
    TORCH_CHECK(base.defined(), "NPU graph capture: ", schema_.name(), " returns an alias of a non-npu input");
    if (schema_.returns()[r].alias_info()->isWrite()) {
      if (base.sizes() != m.sizes()) {
        // An out= argument the operator resizes (torch.arange(4) writes into an empty
        // tensor): it gets its new memory now, and replay must write into that memory,
        // not into the buffer the CPU alias was made over before the resize.
        base.resize_(m.sizes());
        refresh_aliases_of(base);
      }
      return base;
    }
    auto view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(base.storage()),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          base.dtype());
    view.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes(), m.strides(), m.storage_offset());
    return view;
  }

  // After `npu` was resized, the recorded arguments over its storage (itself and the
  // other views of that storage) must alias its new memory, through one CPU storage again.
  void refresh_aliases_of(const at::Tensor& npu) {
    CpuAliasSet fresh_aliases;
    for (auto& m : aliases_) {
      if (!m.first.storage().is_alias_of(npu.storage())) continue;
      at::Tensor fresh = fresh_aliases.alias(m.first);
      auto replace = [&](at::Tensor& t) {
        if (t.defined() && t.unsafeGetTensorImpl() == m.second.unsafeGetTensorImpl()) t = fresh;
      };
      for (auto& iv : cpu_args_) {
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
  }

  const std::shared_ptr<GraphCapture> capture_;
  const c10::OperatorHandle op_;
  const c10::FunctionSchema& schema_;
  const c10::DeviceIndex device_;
  std::vector<c10::IValue> cpu_args_;
  // npu tensor -> its CPU alias (updated when an out= argument is resized)
  std::vector<std::pair<at::Tensor, at::Tensor>> aliases_;
  std::vector<c10::IValue> results_;
  std::vector<OutputSlot> slots_;
  std::vector<at::Tensor> keep_;
};

}  // namespace

bool record_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu, c10::DeviceIndex device,
                     const GeneratorArguments& generators) {
  auto capture = active_capture();
  TORCH_INTERNAL_ASSERT(capture != nullptr);
  const bool checking = capture->checking();
  const size_t num_args = op.schema().arguments().size();
  const size_t begin = stack->size() - num_args;
  OperatorRecording recording(capture, op, std::vector<c10::IValue>(stack->begin() + begin, stack->end()),
                              npu_to_cpu, device);

  if (!recording.generators_registered(generators)) return false;
  if (!checking) recording.refuse_overlap();
  std::optional<torch::jit::Stack> meta = recording.output_geometry();
  if (!meta.has_value() || !recording.returns_only_tensors(*meta) || checking) return false;

  recording.allocate_outputs(*meta);
  std::vector<observe::TensorAccess> accesses = recording.accesses();
  GraphNode node;
  // Each replay of the node announces it to the profiler and the stream sanitizer.
  node.native = observe::replayed_node(op.schema().name(), device, std::move(accesses),
                                       recording.replayed_call(generators));
  capture->add_node(std::move(node), recording.take_keep());
  stack->erase(stack->begin() + begin, stack->end());
  for (auto& r : recording.take_results()) stack->push_back(std::move(r));
  return true;
}

}  // namespace torch_npu
