// The caching allocator of the public C++ API (NPUCachingAllocator.h): the runtime's
// allocator, the one npu tensors and torch.npu's memory statistics use.
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"

#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/device.h"

namespace c10_npu::NPUCachingAllocator {

c10::Allocator* get() {
  torch_npu::init_allocator();
  return torch_npu::npu_allocator();
}

void* raw_alloc(size_t nbytes) {
  c10::DeviceIndex device = torch_npu::current_device();
  return torch_npu::raw_alloc(nbytes, device, getCurrentNPUStream(device).id());
}

void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) {
  NPUStream s = streamFromHandle(stream);
  return torch_npu::raw_alloc(nbytes, s.device_index(), s.id());
}

void raw_delete(void* ptr) { torch_npu::raw_delete(ptr); }

void recordStream(const c10::DataPtr& ptr, NPUStream stream) {
  if (ptr.get() == nullptr) return;
  auto device = torch_npu::device_of_ptr(ptr.get());
  TORCH_CHECK(device.has_value(), "recordStream: ", ptr.get(), " is not npu memory");
  TORCH_CHECK(*device == stream.device_index(), "recordStream: the memory is on npu:", static_cast<int>(*device),
              " but the stream belongs to ", stream.device());
  // Blocks are reused only after the host has run every kernel queued before the free
  // (work runs as it is queued), so no stream needs to be remembered.
}

void emptyCache(bool /*check_error*/) { torch_npu::empty_cache(); }

c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) {
  torch_npu::check_device_index(device, "getDeviceStats");
  return torch_npu::device_stats(device);
}

void resetPeakStats(c10::DeviceIndex device) { torch_npu::reset_peak_memory_stats(device); }

void resetAccumulatedStats(c10::DeviceIndex device) { torch_npu::reset_accumulated_memory_stats(device); }

}  // namespace c10_npu::NPUCachingAllocator
