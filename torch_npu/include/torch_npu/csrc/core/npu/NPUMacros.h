// Export marker of torch_npu's public C++ API.
//
// libtorch_npu.so is built with hidden visibility: only declarations marked
// TORCH_NPU_API are part of its dynamic symbol table, and so linkable by extensions.
#pragma once

#define TORCH_NPU_API __attribute__((visibility("default")))
