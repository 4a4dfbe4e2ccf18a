// Errors of the npu for C++ extensions: the message of the last failed ACL-style call
// (GetDevice, SetDevice, ...) on this thread.
#pragma once

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

// The calling thread's last error message ("" if none); valid until the next failing call.
TORCH_NPU_API char* c10_npu_get_error_message();

}  // namespace c10_npu
