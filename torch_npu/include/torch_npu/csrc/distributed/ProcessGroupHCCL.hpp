// c10d_npu::ProcessGroupHCCL: the c10d backend of npu tensors (torch.distributed's "hccl"),
// as C++ extensions see it.
//
// The backend of an "hccl" group is this class:
//   auto backend = process_group->getBackend(c10::DeviceType::PrivateUse1);
//   auto* hccl = static_cast<c10d_npu::ProcessGroupHCCL*>(backend.get());
// Its collectives are c10d::Backend's virtual functions; what Ascend adds is declared here.
#pragma once

#include "torch_npu/csrc/core/npu/NPUMacros.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace c10d_npu {

class TORCH_NPU_API ProcessGroupHCCL : public c10d::Backend {
 public:
  // Posts, for every i, op_type[i] ("isend" or "irecv") of tensors[i] to or from rank
  // remote_rank_list[i] of this group, all at once (a receive does not wait for a send
  // posted after it), and returns one work that completes when all of them have. The
  // arguments are checked before anything is posted.
  c10::intrusive_ptr<c10d::Work> batch_isend_irecv(std::vector<std::string>& op_type, std::vector<at::Tensor>& tensors,
                                                   std::vector<int64_t> remote_rank_list);

 protected:
  ProcessGroupHCCL(int rank, int size) : c10d::Backend(rank, size) {}
};

}  // namespace c10d_npu
