// How CPU kernels see npu memory: CPU tensors over the bytes of npu tensors
// (cpu_aliases.cpp), and npu tensors over the memory of the CPU results (kernels.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/util/SmallVector.h>

#include <utility>
#include <vector>

namespace torch_npu {

// A CPU tensor over the same bytes as the npu tensor `t` (no copy), over a CPU storage of
// its own: only for a tensor that is the sole npu argument of the work.
at::Tensor cpu_alias(const at::Tensor& t);
// The CPU aliases of the npu tensors of one piece of work: one CPU storage per npu
// storage and one CPU tensor per npu tensor, so that ATen's overlap checks (which compare
// storages and TensorImpls) see the aliasing the npu tensors have.
class CpuAliasSet {
 public:
  at::Tensor alias(const at::Tensor& t);
  // True when `t` has no alias in the set yet.
  bool is_new(const at::Tensor& t) const;

 private:
  // Inline room for the tensors of an ordinary call: no heap allocation for the set.
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 4> storages_;
  c10::SmallVector<std::pair<c10::TensorImpl*, at::Tensor>, 4> tensors_;
};
// An npu tensor that takes over the memory of a CPU tensor produced on behalf of
// `device` (no copy when the memory came from the device allocator).
at::Tensor adopt_cpu_result(const at::Tensor& cpu, c10::DeviceIndex device);

}  // namespace torch_npu
