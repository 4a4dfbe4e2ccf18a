// Output geometry for NPU graph capture: the operator's meta kernel run on meta copies of
// its arguments, except where that kernel is one of PyTorch's Python decompositions.
// Running one of those imports torch._dynamo on first use, and capturing eager work must
// not load the compiler stack, so the matrix products are answered here and other such
// operators by their CPU kernel on zero-filled scratch copies of the arguments.
#include "torch_npu/csrc/graphs/meta_shapes.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty_strided.h>

#include <Python.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace torch_npu {
namespace {

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

}  // namespace

torch::jit::Stack meta_outputs(const c10::OperatorHandle& op, const std::vector<c10::IValue>& cpu_args) {
  if (auto native = native_meta(op.schema(), cpu_args)) return std::move(*native);
  if (auto scratch = scratch_meta(op, cpu_args)) return std::move(*scratch);
  torch::jit::Stack meta_stack;
  meta_stack.reserve(cpu_args.size());
  for (const auto& iv : cpu_args) meta_stack.push_back(to_meta(iv));
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
  return meta_stack;
}

bool has_meta_kernel(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

}  // namespace torch_npu
