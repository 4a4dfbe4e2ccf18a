// The dtypes CUDA's kernels take and cpu's do not, computed on npu in a wider dtype.
//
// The simulated npu runs each operator with its cpu kernel, but code written for an
// accelerator follows CUDA's dtype support: transformers' Mixtral counts tokens per expert
// with torch.histc on int32 (CUDA has the kernel, cpu raises "histogram_cpu not implemented
// for 'Int'"); complex32, half avg_pool3d, bool abs are the same story. For each (operator,
// dtype) where CUDA has a kernel and cpu has none, this table names a dtype cpu's kernel
// does take and that holds every value exactly; the fallback converts the arguments of the
// narrow dtype to it, runs cpu's kernel, and rounds the results back to the dtype CUDA
// returns (values computed in the wider type, as CUDA's kernels compute them in their
// accumulation type). The table is checked against PyTorch's OpInfo database by
// test/ops/test_cuda_dtypes.py, which lists the (op, dtype) pairs OpInfo says CUDA supports
// and cpu does not.
#include "torch_npu/csrc/aten/cuda_dtype_widening.h"

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace torch_npu {
namespace {

struct Widening {
  at::ScalarType narrow;   // the argument dtype cpu has no kernel for
  at::ScalarType compute;  // the dtype cpu's kernel runs in
};

using Table = std::unordered_map<std::string, std::vector<Widening>>;

const Table& widening_table() {
  static const Table table = [] {
    using S = at::ScalarType;
    const std::vector<Widening> complex_half{{S::ComplexHalf, S::ComplexFloat}};
    const std::vector<Widening> reduced_float{{S::Half, S::Float}, {S::BFloat16, S::Float}};
    const std::vector<Widening> half_only{{S::Half, S::Float}};
    // Integers are counted in double: exact for every value below 2**53.
    const std::vector<Widening> integers{{S::Byte, S::Double}, {S::Char, S::Double}, {S::Short, S::Double},
                                         {S::Int, S::Double}, {S::Long, S::Double}};
    Table t;
    for (const char* name : {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan",
                             "tanh", "exp", "log", "sqrt", "rsqrt", "sigmoid", "angle", "div", "pow", "lerp",
                             "logaddexp", "sum", "prod", "_fft_c2c", "_fft_c2r"}) {
      t[std::string("aten::") + name] = complex_half;
    }
    // A float16 signal (torch.stft, direct calls; the torch.fft composites: half_precision_fft.cpp).
    t["aten::_fft_r2c"] = half_only;
    t["aten::trace"] = {{S::ComplexHalf, S::ComplexFloat}, {S::Bool, S::Byte}};
    t["aten::abs"] = {{S::Bool, S::Byte}};
    t["aten::histc"] = integers;
    for (const char* name : {"avg_pool3d", "avg_pool3d_backward", "_upsample_bilinear2d_aa",
                             "_upsample_bilinear2d_aa_backward", "multi_margin_loss", "multi_margin_loss_backward",
                             "multilabel_margin_loss_forward", "multilabel_margin_loss_backward"}) {
      t[std::string("aten::") + name] = reduced_float;
    }
    for (const char* name : {"rrelu_with_noise", "rrelu_with_noise_"}) t[std::string("aten::") + name] = half_only;
    return t;
  }();
  return table;
}

// The dtype a result computed in `computed` is rounded back to, given the widening.
std::optional<at::ScalarType> narrowed(at::ScalarType computed, const Widening& w) {
  if (computed == w.compute) return w.narrow;
  if (c10::isComplexType(w.narrow) && computed == c10::toRealValueType(w.compute)) {
    return c10::toRealValueType(w.narrow);
  }
  if (c10::isFloatingType(w.narrow) && computed == c10::toComplexType(w.compute)) {
    return c10::toComplexType(w.narrow);
  }
  return std::nullopt;
}

// True for a ScalarType argument (`dtype=`) that holds `narrow`: torch.prod(x, dtype=complex32)
// asks cpu's kernel for a result dtype it lacks just as a complex32 tensor does.
bool is_narrow_dtype_argument(const c10::Argument& arg, const c10::IValue& iv, at::ScalarType narrow) {
  if (!iv.isInt()) return false;
  c10::TypePtr type = arg.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType && static_cast<at::ScalarType>(iv.toInt()) == narrow;
}

const Widening* widening_for(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  const Table& table = widening_table();
  auto it = table.find(op.schema().name());
  if (it == table.end()) return nullptr;
  const auto& args = op.schema().arguments();
  for (size_t i = begin; i < stack.size(); ++i) {
    for (const Widening& w : it->second) {
      if (is_narrow_dtype_argument(args[i - begin], stack[i], w.narrow)) return &w;
    }
    if (!stack[i].isTensor()) continue;
    const at::Tensor& t = stack[i].toTensor();
    if (!t.defined()) continue;
    for (const Widening& w : it->second) {
      if (t.scalar_type() == w.narrow) return &w;
    }
  }
  return nullptr;
}

void run_widened(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys, torch::jit::Stack* stack,
                 size_t begin, const Widening& w) {
  const auto& args = op.schema().arguments();
  // Arguments the kernel writes (in-place self, out=): the widened copy is written, then
  // rounded back into the caller's tensor, which is what the kernel returns.
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (caller's tensor, widened copy)
  // A reduction given dtype= first casts its input to that dtype (CUDA's reductions do), so
  // under dtype=<narrow> an input of another dtype is rounded to the narrow one first.
  bool narrow_dtype_requested = false;
  for (size_t i = 0; i < args.size(); ++i) {
    narrow_dtype_requested |= is_narrow_dtype_argument(args[i], (*stack)[begin + i], w.narrow);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& iv = (*stack)[begin + i];
    if (is_narrow_dtype_argument(args[i], iv, w.narrow)) {
      iv = static_cast<int64_t>(w.compute);
      continue;
    }
    if (!iv.isTensor()) continue;
    const at::Tensor t = iv.toTensor();
    if (!t.defined()) continue;
    const auto* alias = args[i].alias_info();
    const bool is_written = alias != nullptr && alias->isWrite();
    if (t.scalar_type() != w.narrow && !(narrow_dtype_requested && !is_written)) continue;
    at::Tensor wide = t.to(w.narrow).to(w.compute);
    if (is_written) written.emplace_back(t, wide);
    iv = wide;
  }
  op.redispatchBoxed(cpu_keys, stack);
  for (auto& [caller, wide] : written) {
    if (caller.sizes() != wide.sizes()) caller.resize_(wide.sizes());
    caller.copy_(wide);
  }
  const size_t num_returns = op.schema().returns().size();
  for (size_t r = stack->size() - num_returns; r < stack->size(); ++r) {
    c10::IValue& iv = (*stack)[r];
    if (!iv.isTensor()) continue;
    const at::Tensor result = iv.toTensor();
    bool was_written = false;
    for (const auto& [caller, wide] : written) {
      if (result.unsafeGetTensorImpl() == wide.unsafeGetTensorImpl()) {
        iv = caller;
        was_written = true;
        break;
      }
    }
    if (was_written || !result.defined()) continue;
    if (auto to = narrowed(result.scalar_type(), w)) iv = result.to(*to);
  }
}

std::vector<std::string> widening_entries() {
  std::vector<std::string> entries;
  for (const auto& [name, widenings] : widening_table()) {
    for (const Widening& w : widenings) {
      entries.push_back(name + ":" + c10::toString(w.narrow) + ":" + c10::toString(w.compute));
    }
  }
  return entries;
}

}  // namespace

void redispatch_to_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys, torch::jit::Stack* stack) {
  const size_t begin = stack->size() - op.schema().arguments().size();
  if (const Widening* w = widening_for(op, *stack, begin)) {
    run_widened(op, cpu_keys, stack, begin, *w);
    return;
  }
  op.redispatchBoxed(cpu_keys, stack);
}

TORCH_LIBRARY_FRAGMENT(npu, m) {
  // "aten::op:NarrowDtype:ComputeDtype" for every entry, for the tests that check the table.
  m.def("_cuda_dtype_widenings() -> str[]", &widening_entries);
}

}  // namespace torch_npu
