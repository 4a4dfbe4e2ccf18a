// Pinned host memory (pin_memory(), non_blocking copies), cached like CUDA's host allocator.
//
// Blocks are rounded up to a power of two and kept for reuse when freed, with the
// statistics torch.cuda.host_memory_stats reports; host_empty_cache() gives the cached
// ones back. Pinned memory is ordinary host memory whose addresses are remembered.
// It is registered as the npu's at::HostAllocator, the object torch.accelerator's host
// functions (empty_host_cache, host memory stats) ask for; without one they would call
// through a null allocator.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/host_allocator.h"

#include <ATen/ATen.h>
#include <ATen/core/CachingHostAllocator.h>

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <chrono>
#include <map>
#include <unordered_map>

namespace torch_npu {
namespace {

constexpr size_t kHostAlignment = 64;

std::mutex g_host_mutex;
HostStats g_host_stats;
std::map<uintptr_t, size_t> g_host_blocks;            // every owned block: address -> size
std::unordered_map<void*, size_t> g_host_active;       // handed out: address -> size
std::multimap<size_t, void*> g_host_free;              // cached: size -> address

int64_t elapsed_us(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - since).count();
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(g_host_mutex);
  auto it = g_host_active.find(ptr);
  TORCH_INTERNAL_ASSERT(it != g_host_active.end(), "freeing pinned memory that is not live");
  size_t size = it->second;
  g_host_active.erase(it);
  g_host_stats.active_requests.decrease(1);
  g_host_stats.active_bytes.decrease(size);
  g_host_free.emplace(size, ptr);
}

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU)};
    size_t size = c10::llvm::PowerOf2Ceil(std::max<size_t>(nbytes, kHostAlignment));
    std::lock_guard<std::mutex> lock(g_host_mutex);
    void* ptr = nullptr;
    auto it = g_host_free.find(size);
    if (it != g_host_free.end()) {
      ptr = it->second;
      g_host_free.erase(it);
    } else {
      auto start = std::chrono::steady_clock::now();
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, kHostAlignment, size) == 0 && ptr != nullptr,
                       "could not allocate ", size, " bytes of pinned host memory");
      g_host_stats.host_alloc_time.increase(elapsed_us(start));
      g_host_stats.num_host_alloc++;
      g_host_stats.allocations.increase(1);
      g_host_stats.allocated_bytes.increase(size);
      g_host_blocks.emplace(reinterpret_cast<uintptr_t>(ptr), size);
    }
    g_host_active.emplace(ptr, size);
    g_host_stats.active_requests.increase(1);
    g_host_stats.active_bytes.increase(size);
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { std::memcpy(dest, src, count); }
  // Copies from pinned memory have finished when the host frees it: nothing to wait for.
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }
  void empty_cache() override;
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;
};

PinnedHostAllocator g_pinned_allocator;

}  // namespace

REGISTER_HOST_ALLOCATOR(kNpu, &g_pinned_allocator)

c10::Allocator* pinned_host_allocator() { return &g_pinned_allocator; }

bool is_pinned_host_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = g_host_blocks.upper_bound(p);
  if (it == g_host_blocks.begin()) return false;
  --it;
  // Inside a block that is handed out (views into pinned buffers included).
  return p < it->first + it->second && g_host_active.count(reinterpret_cast<void*>(it->first)) > 0;
}

void host_empty_cache() {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  for (auto& entry : g_host_free) {
    auto start = std::chrono::steady_clock::now();
    std::free(entry.second);
    g_host_stats.host_free_time.increase(elapsed_us(start));
    g_host_stats.num_host_free++;
    g_host_stats.allocations.decrease(1);
    g_host_stats.allocated_bytes.decrease(entry.first);
    g_host_blocks.erase(reinterpret_cast<uintptr_t>(entry.second));
  }
  g_host_free.clear();
}

HostStats host_memory_stats() {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  return g_host_stats;
}

void reset_accumulated_host_memory_stats() {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  for (auto* s : {&g_host_stats.allocations, &g_host_stats.allocated_bytes, &g_host_stats.active_requests,
                  &g_host_stats.active_bytes}) {
    s->reset_accumulated();
  }
  g_host_stats.host_alloc_time.reset_accumulated();
  g_host_stats.host_free_time.reset_accumulated();
  g_host_stats.num_host_alloc = 0;
  g_host_stats.num_host_free = 0;
}

void reset_peak_host_memory_stats() {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  for (auto* s : {&g_host_stats.allocations, &g_host_stats.allocated_bytes, &g_host_stats.active_requests,
                  &g_host_stats.active_bytes}) {
    s->reset_peak();
  }
  g_host_stats.host_alloc_time.reset_peak();
  g_host_stats.host_free_time.reset_peak();
}

void PinnedHostAllocator::empty_cache() { host_empty_cache(); }

at::HostStats PinnedHostAllocator::get_stats() {
  HostStats ours = host_memory_stats();
  at::HostStats stats;
  stats.active_requests = ours.active_requests;
  stats.active_bytes = ours.active_bytes;
  stats.allocations = ours.allocations;
  stats.allocated_bytes = ours.allocated_bytes;
  stats.host_alloc_time = ours.host_alloc_time;
  stats.host_free_time = ours.host_free_time;
  stats.num_host_alloc = ours.num_host_alloc;
  stats.num_host_free = ours.num_host_free;
  return stats;
}

void PinnedHostAllocator::reset_accumulated_stats() { reset_accumulated_host_memory_stats(); }

void PinnedHostAllocator::reset_peak_stats() { reset_peak_host_memory_stats(); }

}  // namespace torch_npu
