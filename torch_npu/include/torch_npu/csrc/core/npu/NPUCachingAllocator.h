// The npu caching allocator for C++ extensions: the allocator npu tensors come from, so
// memory taken here counts in torch.npu.memory_allocated() and obeys the device's
// capacity (an allocation beyond it raises torch.OutOfMemoryError).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

// The allocator of npu tensors (c10::GetAllocator(PrivateUse1) is the same one).
TORCH_NPU_API c10::Allocator* get();

// Raw device memory on the current device, for the current stream; free with raw_delete.
TORCH_NPU_API void* raw_alloc(size_t nbytes);
TORCH_NPU_API void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream);
TORCH_NPU_API void raw_delete(void* ptr);

// Marks memory as used by `stream` too (Tensor.record_stream).
TORCH_NPU_API void recordStream(const c10::DataPtr& ptr, NPUStream stream);

// Returns the cached, unused blocks of every device (torch.npu.empty_cache()).
TORCH_NPU_API void emptyCache(bool check_error = true);

TORCH_NPU_API c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device);
TORCH_NPU_API void resetPeakStats(c10::DeviceIndex device);
TORCH_NPU_API void resetAccumulatedStats(c10::DeviceIndex device);

}  // namespace c10_npu::NPUCachingAllocator
