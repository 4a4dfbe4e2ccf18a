// Which cpu tensors (and tensors of another npu device) an npu operator accepts: the
// rule of the CUDA kernels, operator by operator.
//
// A CUDA kernel is wrapped by a generated check that all its tensor arguments share one
// device, unless ATen declares the operator `device_check: NoCheck` (the table below,
// generated from native_functions.yaml). Those operators then decide for themselves:
// TensorIterator kernels take 0-dim cpu tensors as scalars, advanced indexing
// (`x[idx]`, `x[idx] = v`) takes cpu index tensors and masks, and index_put_ moves
// indices of any device to the indexed tensor's. Everything else is refused with the
// text CUDA uses. The npu fallback asks here only when it meets such a tensor, so the
// common path pays nothing.
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/adaption.h>

#include <string>
#include <unordered_set>

namespace torch_npu {
namespace {

const std::unordered_set<std::string>& cuda_device_check_exempt() {
  static const std::unordered_set<std::string> table = {
#include "torch_npu/csrc/cuda_as_npu/cuda_device_check_exempt.inc"
  };
  return table;
}

std::string operator_key(const c10::FunctionSchema& schema) {
  std::string name = schema.name();
  if (name.rfind("aten::", 0) == 0) name = name.substr(6);
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  return name;
}

bool is_index_read(const std::string& key) { return key == "index.Tensor" || key == "index.Tensor_out"; }

}  // namespace

void check_foreign_argument(const c10::OperatorHandle& op, size_t arg_index, const at::Tensor& t,
                            c10::DeviceIndex device) {
  const auto& schema = op.schema();
  const c10::Argument& arg = schema.arguments().at(arg_index);
  const std::string key = operator_key(schema);
  const c10::Device npu(kNpu, device);
  const bool written = arg.alias_info() != nullptr && arg.alias_info()->isWrite();
  // Operators outside the aten namespace get no generated device check on CUDA either,
  // but their kernels index raw device memory: refuse like the generated check.
  const bool exempt = schema.name().rfind("aten::", 0) == 0 && cuda_device_check_exempt().count(key) > 0;
  if (!exempt) {
    c10::impl::common_device_check_failure(npu, t, schema.name().c_str(), arg.name().c_str());
  }
  if (arg.name() == "indices") {
    if (key == "_index_put_impl_") return;  // moved to the indexed tensor's device
    if (is_index_read(key)) {
      TORCH_CHECK(t.is_cpu(), "indices should be either on ", c10::kCPU,
                        " or on the same device as the indexed tensor (", npu, ")");
      return;
    }
  }
  // A 0-dim value of index_put_ is moved to the device, whatever device it is on.
  if (key == "_index_put_impl_" && arg.name() == "values" && t.dim() == 0) return;
  // TensorIterator takes 0-dim cpu inputs as scalars.
  if (t.is_cpu() && t.dim() == 0 && !written) return;
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", npu,
              " and ", t.device(), "!");
}

}  // namespace torch_npu
