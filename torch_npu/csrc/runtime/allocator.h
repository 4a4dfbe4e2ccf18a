// Device memory of the npu devices (allocator.cpp): the caching allocator, its memory
// pools (NPU graphs, MemPools), statistics, settings and history, and the redirect that
// lets CPU kernels allocate their outputs in device memory.
//
// The runtime keeps device memory in host RAM so that every ATen CPU kernel can run
// directly on an npu tensor's bytes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_npu {

using CreateContextFn = std::shared_ptr<c10::GatheredContext> (*)();

struct AllocatorSettings {
  std::string settings;
  size_t max_split_size;
  double garbage_collection_threshold;
  bool expandable_segments;
  std::vector<size_t> roundup_power2_divisions;
};

struct MemorySnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;
  std::vector<std::vector<c10::CachingDeviceAllocator::TraceEntry>> device_traces;
};

// Parses PYTORCH_NPU_ALLOC_CONF and sizes the devices; raises on a bad setting.
void init_allocator();
bool allocator_initialized();
c10::Allocator* npu_allocator();
// A new npu tensor of this geometry and dtype on `device` (made current meanwhile), its
// memory from the device's caching allocator: what `torch.empty_strided(..., device=npu)`
// returns, with no argument checks beyond the caller's.
at::Tensor empty_strided_npu_tensor(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype,
                                    c10::DeviceIndex device);
// Allocates device memory; the DataPtr reports `reported_device` (npu for device
// tensors, cpu for memory handed to a CPU kernel running on behalf of the device).
c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device, c10::Device reported_device);
void* raw_alloc(size_t nbytes, c10::DeviceIndex device, int64_t stream);
void raw_delete(void* ptr);
bool is_device_memory_deleter(c10::DeleterFnPtr deleter);
// The device whose memory holds `ptr`, if any.
std::optional<c10::DeviceIndex> device_of_ptr(const void* ptr);
// The memory pool of the block starting at `ptr` (0 = general cache), or -1 if none.
int64_t pool_of_ptr(const void* ptr);
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
int64_t memory_allocated_bytes(c10::DeviceIndex device);
void reset_peak_memory_stats(c10::DeviceIndex device);
void reset_accumulated_memory_stats(c10::DeviceIndex device);
void empty_cache();
void set_memory_capacity(c10::DeviceIndex device, int64_t nbytes);
int64_t memory_capacity(c10::DeviceIndex device);
void set_memory_fraction(double fraction, c10::DeviceIndex device);
double get_memory_fraction(c10::DeviceIndex device);
std::pair<int64_t, int64_t> mem_get_info(c10::DeviceIndex device);
void set_allocator_settings(const std::string& settings);
AllocatorSettings allocator_settings();
void record_memory_history(bool enabled, CreateContextFn context_fn, size_t max_entries,
                           c10::CachingDeviceAllocator::RecordContext when, bool clear_history,
                           uint32_t skip_actions);
MemorySnapshot memory_snapshot(std::optional<int64_t> pool_filter, bool include_traces);

// Memory pools for graphs and MemPools. Pool 0 is the ordinary cache.
int64_t new_pool_id();
void retain_pool(int64_t pool);
void release_pool(int64_t pool);  // frees the pool's cached blocks once unused
int64_t pool_use_count(int64_t pool);

// Sets the pool this thread's device allocations are drawn from; returns the previous one.
int64_t exchange_thread_pool(int64_t pool);
// The same for one device only (use_mem_pool(pool, device)); returns (pool, device) before.
std::pair<int64_t, int64_t> exchange_thread_pool_for_device(int64_t pool, int64_t device);
// While set on this thread, device allocations are drawn from this pool.
struct PoolAllocationScope {
  explicit PoolAllocationScope(int64_t pool);
  ~PoolAllocationScope();
  int64_t previous;
  c10::DeviceIndex previous_device = -1;
};

// While set on this thread, allocations made through the CPU allocator come from the
// given device's memory (so CPU kernels write their outputs straight into device memory).
struct CpuAllocationRedirect {
  explicit CpuAllocationRedirect(c10::DeviceIndex device);
  ~CpuAllocationRedirect();
  c10::DeviceIndex previous;
};
void install_cpu_allocation_redirect();
// Whether the CPU allocator in force is that redirect (another library may have set its own).
bool cpu_allocation_redirect_in_force();
void install_allocators();

}  // namespace torch_npu
