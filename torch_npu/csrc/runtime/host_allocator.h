// Pinned host memory: the allocator behind pin_memory() and non_blocking copies, and its
// statistics (host_allocator.cpp).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>

namespace torch_npu {

struct HostStats {
  c10::CachingAllocator::Stat active_requests;
  c10::CachingAllocator::Stat active_bytes;
  c10::CachingAllocator::Stat allocations;
  c10::CachingAllocator::Stat allocated_bytes;
  c10::CachingAllocator::DurationStat host_alloc_time;
  c10::CachingAllocator::DurationStat host_free_time;
  int64_t num_host_alloc = 0;
  int64_t num_host_free = 0;
};
c10::Allocator* pinned_host_allocator();
bool is_pinned_host_ptr(const void* ptr);
void host_empty_cache();
HostStats host_memory_stats();
void reset_accumulated_host_memory_stats();
void reset_peak_host_memory_stats();

}  // namespace torch_npu
