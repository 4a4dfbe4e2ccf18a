// The fused npu_* operators' schemas, defined when the runtime library loads, each with a
// stand-in kernel that imports the operator's Python family on its first call.
//
// PyTorch resolves `torch.ops.npu.<name>` in the dispatcher, with no hook on the lookup, so
// every operator must exist before anything asks for it (eager code, an exported program
// loaded in a fresh process, Dynamo, FakeTensorMode). Defining ~110 schemas and ~220 kernels
// through `torch.library` costs about as much as the rest of `import torch_npu`; defined
// here, it costs a few percent of that. The schemas come from `npu_op_schemas.inc`, written
// from `torch_npu/ops/_catalog.py` by `python -m torch_npu.ops`.
//
// The stand-in sits at Autograd (the first key any call reaches, so the family's autograd
// kernel serves the first call) and CompositeExplicitAutograd (calls made below autograd,
// e.g. in inference mode). It asks Python to import the family (`torch_npu.ops.load`),
// whose `OpFamily` drops the family's stand-ins (`_npu_drop_op_stand_ins`) before it
// registers its own kernels at the same keys, then calls the operator again with the same
// stack. The kernel is a plain function (no functor state), so dropping the library that
// holds it while it runs frees nothing it uses.
#include <torch/extension.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch_npu {
namespace {

struct OpSchemaEntry {
  const char* family;
  const char* schema;
};

const OpSchemaEntry kOpSchemas[] = {
#include "torch_npu/csrc/aten/npu_op_schemas.inc"
};

// "name" or "name.overload" (the qualified name in the schema) of an entry.
std::string qualified_name(const char* schema) {
  std::string text(schema);
  const auto end = text.find('(');
  const auto first = text.find_first_not_of(' ');
  auto last = text.find_last_not_of(' ', end - 1);
  return text.substr(first, last - first + 1);
}

// "npu::name" or "npu::name.overload" -> family; filled once at load, read-only after.
const std::unordered_map<std::string, std::string>& family_by_operator() {
  static const auto* families = [] {
    auto* map = new std::unordered_map<std::string, std::string>();
    for (const auto& entry : kOpSchemas) {
      map->emplace("npu::" + qualified_name(entry.schema), entry.family);
    }
    return map;
  }();
  return *families;
}

// Family -> the library holding its stand-in kernels, until the family drops it.
std::mutex stand_ins_mutex;
std::map<std::string, std::unique_ptr<torch::Library>>& stand_ins() {
  static auto* libraries = new std::map<std::string, std::unique_ptr<torch::Library>>();
  return *libraries;
}

bool has_stand_ins(const std::string& family) {
  std::lock_guard<std::mutex> lock(stand_ins_mutex);
  return stand_ins().count(family) != 0;
}

std::string operator_key(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void load_family_then_call(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const std::string key = operator_key(op);
  const auto found = family_by_operator().find(key);
  TORCH_INTERNAL_ASSERT(found != family_by_operator().end(), key, " has no npu op family");
  const std::string family = found->second;
  TORCH_CHECK(Py_IsInitialized(), key, "'s kernels are registered by the torch_npu Python package: ",
              "call it from a process that imported torch_npu");
  std::string error;
  {
    pybind11::gil_scoped_acquire gil;
    try {
      pybind11::module_::import("torch_npu.ops").attr("load")(family);
    } catch (pybind11::error_already_set& e) {
      error = e.what();
    }
  }
  TORCH_CHECK(error.empty(), "importing torch_npu.ops.", family, " for the first call of ", key, " failed: ", error);
  // The family's OpFamily drops the stand-ins; if it did not, calling again would loop.
  TORCH_CHECK(!has_stand_ins(family), "torch_npu.ops.", family, " was imported but did not register ", key,
              " (its OpFamily must be created with the module's __name__)");
  op.callBoxed(stack);
}

void define_schemas_with_stand_ins(torch::Library& definitions) {
  std::lock_guard<std::mutex> lock(stand_ins_mutex);
  for (const auto& entry : kOpSchemas) {
    definitions.def(entry.schema);
    auto& library = stand_ins()[entry.family];
    if (!library) {
      library = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "npu", std::nullopt, __FILE__, __LINE__);
    }
    const std::string name = qualified_name(entry.schema);
    for (const auto key : {c10::DispatchKey::Autograd, c10::DispatchKey::CompositeExplicitAutograd}) {
      library->impl(name.c_str(), torch::dispatch(key, torch::CppFunction::makeFromBoxedFunction<&load_family_then_call>()));
    }
  }
}

// Drops `family`'s stand-in kernels; false if it had none (dropped already, or no schemas).
bool drop_stand_ins(const std::string& family) {
  std::unique_ptr<torch::Library> library;
  {
    std::lock_guard<std::mutex> lock(stand_ins_mutex);
    auto found = stand_ins().find(family);
    if (found == stand_ins().end()) {
      return false;
    }
    library = std::move(found->second);
    stand_ins().erase(found);
  }
  library.reset();  // deregisters its kernels, outside the lock
  return true;
}

// [(family, "name" or "name.overload")] of every schema defined here.
std::vector<std::pair<std::string, std::string>> predefined_operators() {
  std::vector<std::pair<std::string, std::string>> operators;
  for (const auto& entry : kOpSchemas) {
    operators.emplace_back(entry.family, qualified_name(entry.schema));
  }
  return operators;
}

}  // namespace

void add_op_stand_in_bindings(pybind11::module_& m) {
  m.def("_npu_predefined_ops", &predefined_operators);
  m.def("_npu_drop_op_stand_ins", &drop_stand_ins, pybind11::arg("family"));
}

}  // namespace torch_npu

TORCH_LIBRARY_FRAGMENT(npu, m) {
  torch_npu::define_schemas_with_stand_ins(m);
}
