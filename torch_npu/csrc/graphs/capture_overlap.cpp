// Whether the CPU kernel of an operator recorded in an NPU graph capture refuses the
// aliasing of its arguments, found at capture time.
//
// On CUDA the overlap checks (`at::assert_no_internal_overlap`, `assert_no_partial_overlap`,
// `assert_no_overlap`, inside TensorIterator and inside many kernels) run on the host when
// the kernel is issued, so an overlapping call raises inside the capture. A recorded npu
// operator runs its CPU kernel only at replay, and its shape comes from a meta kernel,
// which for most operators is a Python meta function without those checks. The rule is
// the CPU kernel's own, operator by operator, so it is asked directly: only when a written
// argument overlaps itself or shares memory with another argument (the only calls an
// overlap check can refuse), the CPU kernel runs once on scratch copies of the arguments'
// memory, with their geometry and aliasing, and its overlap refusal, if any, is the error.
#include "torch_npu/csrc/graphs/npu_graph.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <ATen/MemoryOverlap.h>

#include <cstring>

namespace torch_npu {
namespace {

// Calls every tensor of the argument `iv` (a tensor or a list) with `fn(tensor)`.
template <typename Fn>
void for_each_tensor(const c10::IValue& iv, Fn&& fn) {
  if (iv.isTensor()) {
    if (iv.toTensor().defined()) fn(iv.toTensor());
  } else if (iv.isTensorList()) {
    for (const at::Tensor& t : iv.toTensorList()) fn(t);
  } else if (iv.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
      if (t.has_value() && t->defined()) fn(*t);
    }
  }
}

bool may_be_refused(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  struct Use {
    const c10::StorageImpl* storage;
    bool written;
  };
  std::vector<Use> uses;
  bool strided_only = true;
  bool overlaps_itself = false;
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (t.layout() != at::kStrided || !t.has_storage()) {
        strided_only = false;
        return;
      }
      if (written && at::has_internal_overlap(t) == at::MemOverlap::Yes) overlaps_itself = true;
      uses.push_back(Use{t.storage().unsafeGetStorageImpl(), written});
    });
  }
  if (!strided_only) return false;  // the CPU kernel of a sparse call is not run here
  if (overlaps_itself) return true;
  for (size_t a = 0; a < uses.size(); ++a) {
    if (!uses[a].written) continue;
    for (size_t b = 0; b < uses.size(); ++b) {
      if (a != b && uses[a].storage == uses[b].storage) return true;
    }
  }
  return false;
}

// Swallows the warnings of the probe run: the replay warns as eager would.
struct SilentWarnings : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// `args` with every tensor moved onto scratch CPU memory holding a copy of its storage's
// bytes (one scratch storage per storage), and every generator cloned.
std::vector<c10::IValue> scratch_arguments(const std::vector<c10::IValue>& args) {
  std::vector<std::pair<const c10::StorageImpl*, c10::Storage>> scratch;
  auto move = [&](const at::Tensor& t) -> at::Tensor {
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const c10::Storage* copy = nullptr;
    for (const auto& [original, s] : scratch) {
      if (original == storage) copy = &s;
    }
    if (copy == nullptr) {
      const size_t nbytes = storage->nbytes();
      c10::Storage fresh(c10::Storage::use_byte_size_t(), nbytes, c10::GetCPUAllocator(), /*resizable=*/true);
      if (nbytes > 0 && storage->data() != nullptr) std::memcpy(fresh.mutable_data(), storage->data(), nbytes);
      scratch.emplace_back(storage, std::move(fresh));
      copy = &scratch.back().second;
    }
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(*copy), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     t.dtype());
    impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) impl->_set_conj(true);
    if (t.is_neg()) impl->_set_neg(true);
    return at::Tensor(std::move(impl));
  };
  // One scratch tensor per argument tensor, so that a tensor passed twice stays one tensor.
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> moved;
  auto move_once = [&](const at::Tensor& t) -> at::Tensor {
    for (const auto& [original, m] : moved) {
      if (original == t.unsafeGetTensorImpl()) return m;
    }
    at::Tensor m = move(t);
    moved.emplace_back(t.unsafeGetTensorImpl(), m);
    return m;
  };
  std::vector<c10::IValue> out;
  out.reserve(args.size());
  for (const c10::IValue& iv : args) {
    if (iv.isTensor()) {
      out.emplace_back(iv.toTensor().defined() ? move_once(iv.toTensor()) : iv.toTensor());
    } else if (iv.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : iv.toTensorList()) list.push_back(move_once(t));
      out.emplace_back(list);
    } else if (iv.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        list.push_back(t.has_value() && t->defined() ? std::optional<at::Tensor>(move_once(*t)) : t);
      }
      out.emplace_back(list);
    } else if (iv.isGenerator()) {
      out.emplace_back(iv.toGenerator().clone());  // the probe must not advance the random state
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

bool is_overlap_refusal(const std::string& message) {
  // The text of every refusal in ATen/MemoryOverlap.cpp.
  return message.rfind("unsupported operation:", 0) == 0;
}

}  // namespace

std::optional<std::string> capture_overlap_refusal(const c10::OperatorHandle& op,
                                                   const std::vector<c10::IValue>& cpu_args) {
  if (!may_be_refused(op.schema(), cpu_args)) return std::nullopt;
  torch::jit::Stack stack = scratch_arguments(cpu_args);
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard guard(&silent);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const c10::Error& e) {
    // Other errors depend on values the capture does not have yet: the replay raises them.
    if (is_overlap_refusal(e.what_without_backtrace())) return std::string(e.what_without_backtrace());
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace torch_npu
