// Caching allocator for simulated device memory (host RAM), with per-device capacity,
// statistics, graph memory pools, and the redirect that lets CPU kernels allocate their
// outputs directly in device memory.
#include "npu_runtime.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace torch_npu {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kRoundSmall = 512;
constexpr size_t kLargeThreshold = 1 << 20;
constexpr size_t kRoundLarge = 2 << 20;

size_t round_size(size_t n) {
  if (n == 0) n = 1;
  size_t unit = n < kLargeThreshold ? kRoundSmall : kRoundLarge;
  return (n + unit - 1) / unit * unit;
}

struct Block {
  void* ptr;
  size_t size;
  c10::DeviceIndex device;
  int64_t pool;
};

struct DeviceState {
  MemoryStats stats;
  // Free blocks by size; one map per pool (0 = general cache).
  std::unordered_map<int64_t, std::multimap<size_t, Block*>> free_blocks;
};

struct Pool {
  int64_t users = 0;
  int64_t live_blocks = 0;
};

std::mutex g_mutex;
std::vector<DeviceState>& devices() {
  static std::vector<DeviceState> states = [] {
    std::vector<DeviceState> s(device_count());
    int64_t capacity_mb = 16384;
    if (const char* env = std::getenv("TORCH_NPU_MEMORY_CAPACITY_MB")) {
      char* end = nullptr;
      long long v = std::strtoll(env, &end, 10);
      TORCH_CHECK(end != env && *end == '\0' && v > 0,
                  "TORCH_NPU_MEMORY_CAPACITY_MB must be a positive integer, got '", env, "'");
      capacity_mb = v;
    }
    for (auto& d : s) d.stats.capacity_bytes = capacity_mb << 20;
    return s;
  }();
  return states;
}
std::unordered_map<int64_t, Pool> g_pools;
int64_t g_next_pool = 1;
thread_local int64_t tls_pool = 0;

void release_free_blocks(DeviceState& dev, int64_t pool) {
  auto it = dev.free_blocks.find(pool);
  if (it == dev.free_blocks.end()) return;
  for (auto& entry : it->second) {
    Block* b = entry.second;
    dev.stats.reserved_bytes -= static_cast<int64_t>(b->size);
    std::free(b->ptr);
    delete b;
  }
  dev.free_blocks.erase(it);
}

// Live blocks by address: a DataPtr's context is its address, as raw allocations need.
std::unordered_map<void*, Block*> g_live;

void free_block_locked(Block* b);

void free_block(void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(ptr);
  TORCH_INTERNAL_ASSERT(it != g_live.end(), "freeing npu memory that is not live");
  Block* b = it->second;
  g_live.erase(it);
  free_block_locked(b);
}

// Frees memory from either the device or the host CPU allocator, for raw deallocations
// made through the CPU allocator while it may be redirected.
c10::DeleterFnPtr g_base_cpu_raw_deleter = nullptr;
void free_device_or_host(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_live.find(ptr);
    if (it != g_live.end()) {
      Block* b = it->second;
      g_live.erase(it);
      free_block_locked(b);
      return;
    }
  }
  g_base_cpu_raw_deleter(ptr);
}

void free_block_locked(Block* b) {
  DeviceState& dev = devices()[b->device];
  dev.stats.allocated_bytes -= static_cast<int64_t>(b->size);
  dev.stats.free_count += 1;
  if (b->pool != 0) {
    auto pit = g_pools.find(b->pool);
    if (pit != g_pools.end()) {
      pit->second.live_blocks -= 1;
      if (pit->second.users == 0 && pit->second.live_blocks == 0) {
        // The pool's graphs are gone: its memory goes back with the last block.
        dev.free_blocks[b->pool].emplace(b->size, b);
        release_free_blocks(dev, b->pool);
        g_pools.erase(pit);
        return;
      }
    }
  }
  dev.free_blocks[b->pool].emplace(b->size, b);
}

std::string format_bytes(int64_t n) {
  char buf[64];
  if (n >= (1LL << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", n / double(1LL << 30));
  } else if (n >= (1LL << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", n / double(1LL << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld bytes", static_cast<long long>(n));
  }
  return buf;
}

Block* take_block(c10::DeviceIndex device, size_t nbytes) {
  size_t size = round_size(nbytes);
  // During a capture, memory for work queued on the captured stream comes from its pool.
  int64_t pool = tls_pool != 0 ? tls_pool : capture_pool_for_allocation(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& dev = devices()[device];
  auto& free_map = dev.free_blocks[pool];
  // Reuse a cached block of the same size (or up to twice as large for small ones).
  auto it = free_map.lower_bound(size);
  if (it != free_map.end() && it->first <= size * 2 && (size < kLargeThreshold || it->first == size)) {
    Block* b = it->second;
    free_map.erase(it);
    dev.stats.allocated_bytes += static_cast<int64_t>(b->size);
    dev.stats.peak_allocated_bytes = std::max(dev.stats.peak_allocated_bytes, dev.stats.allocated_bytes);
    dev.stats.alloc_count += 1;
    if (pool != 0) g_pools[pool].live_blocks += 1;
    g_live.emplace(b->ptr, b);
    return b;
  }
  if (dev.stats.reserved_bytes + static_cast<int64_t>(size) > dev.stats.capacity_bytes) {
    // Give cached blocks of the general cache back before declaring out of memory.
    release_free_blocks(dev, 0);
  }
  if (dev.stats.reserved_bytes + static_cast<int64_t>(size) > dev.stats.capacity_bytes) {
    dev.stats.oom_count += 1;
    int64_t free_bytes = dev.stats.capacity_bytes - dev.stats.reserved_bytes;
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "NPU out of memory on npu:", static_cast<int>(device), ". Tried to allocate ",
                     format_bytes(static_cast<int64_t>(nbytes)), "; npu:", static_cast<int>(device),
                     " has a capacity of ", format_bytes(dev.stats.capacity_bytes), " of which ",
                     format_bytes(free_bytes), " is free; ", format_bytes(dev.stats.allocated_bytes),
                     " is allocated by tensors. Free tensors, call torch.npu.empty_cache(), or raise "
                     "the capacity (TORCH_NPU_MEMORY_CAPACITY_MB).");
  }
  void* ptr = nullptr;
  if (posix_memalign(&ptr, kAlignment, size) != 0 || ptr == nullptr) {
    dev.stats.oom_count += 1;
    TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory on npu:", static_cast<int>(device),
                     ": the host could not provide ", format_bytes(static_cast<int64_t>(size)));
  }
  Block* b = new Block{ptr, size, device, pool};
  dev.stats.reserved_bytes += static_cast<int64_t>(size);
  dev.stats.peak_reserved_bytes = std::max(dev.stats.peak_reserved_bytes, dev.stats.reserved_bytes);
  dev.stats.allocated_bytes += static_cast<int64_t>(size);
  dev.stats.peak_allocated_bytes = std::max(dev.stats.peak_allocated_bytes, dev.stats.allocated_bytes);
  dev.stats.alloc_count += 1;
  if (pool != 0) g_pools[pool].live_blocks += 1;
  g_live.emplace(b->ptr, b);
  return b;
}

class NpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    return allocate_device_memory(nbytes, device, c10::Device(kNpu, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    std::memcpy(dest, src, count);
  }
};

NpuAllocator g_npu_allocator;

// CPU allocator that serves device memory while a CPU kernel runs for a device.
thread_local c10::DeviceIndex tls_redirect_device = -1;

class RedirectingCpuAllocator final : public c10::Allocator {
 public:
  explicit RedirectingCpuAllocator(c10::Allocator* base) : base_(base) {
    g_base_cpu_raw_deleter = base->raw_deleter();
  }
  c10::DataPtr allocate(size_t nbytes) override {
    if (tls_redirect_device >= 0) {
      return allocate_device_memory(nbytes, tls_redirect_device, c10::Device(c10::kCPU));
    }
    return base_->allocate(nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_or_host; }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

// Pinned host memory is ordinary host memory whose pointers are remembered.
std::mutex g_pinned_mutex;
std::unordered_map<const void*, size_t> g_pinned;

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(ptr);
  }
  std::free(ptr);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    if (nbytes > 0) {
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, kAlignment, nbytes) == 0,
                       "could not allocate ", nbytes, " bytes of pinned host memory");
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.emplace(ptr, nbytes);
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    std::memcpy(dest, src, count);
  }
};

PinnedHostAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* npu_allocator() { return &g_npu_allocator; }

c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device, c10::Device reported_device) {
  lazy_init();
  check_device_index(device, "memory allocation");
  if (nbytes == 0) return {nullptr, nullptr, &free_block, reported_device};
  Block* b = take_block(device, nbytes);
  return {b->ptr, b->ptr, &free_block, reported_device};
}

std::optional<c10::DeviceIndex> device_of_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(const_cast<void*>(ptr));
  if (it != g_live.end()) return it->second->device;
  // An address inside a block (a view's data pointer).
  for (const auto& entry : g_live) {
    auto base = static_cast<const char*>(entry.first);
    if (ptr >= base && ptr < base + entry.second->size) return entry.second->device;
  }
  return std::nullopt;
}

int64_t pool_of_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(const_cast<void*>(ptr));
  return it == g_live.end() ? -1 : it->second->pool;
}

bool is_device_memory_deleter(c10::DeleterFnPtr deleter) { return deleter == &free_block; }

MemoryStats memory_stats(c10::DeviceIndex device) {
  check_device_index(device, "memory_stats");
  std::lock_guard<std::mutex> lock(g_mutex);
  return devices()[device].stats;
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  check_device_index(device, "reset_peak_memory_stats");
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& s = devices()[device].stats;
  s.peak_allocated_bytes = s.allocated_bytes;
  s.peak_reserved_bytes = s.reserved_bytes;
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& dev : devices()) release_free_blocks(dev, 0);
}

void set_memory_capacity(c10::DeviceIndex device, int64_t nbytes) {
  check_device_index(device, "set_memory_capacity");
  TORCH_CHECK(nbytes > 0, "memory capacity must be positive, got ", nbytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  devices()[device].stats.capacity_bytes = nbytes;
}

std::pair<int64_t, int64_t> mem_get_info(c10::DeviceIndex device) {
  check_device_index(device, "mem_get_info");
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& s = devices()[device].stats;
  return {s.capacity_bytes - s.reserved_bytes, s.capacity_bytes};
}

c10::Allocator* pinned_host_allocator() { return &g_pinned_allocator; }

bool is_pinned_host_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  // Exact lookup first, then a containing range (views into pinned buffers).
  if (g_pinned.count(ptr)) return true;
  for (auto& entry : g_pinned) {
    auto base = static_cast<const char*>(entry.first);
    if (ptr >= base && ptr < base + entry.second) return true;
  }
  return false;
}

int64_t new_pool_id() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int64_t id = g_next_pool++;
  g_pools[id];
  return id;
}

void retain_pool(int64_t pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pools[pool].users += 1;
}

void release_pool(int64_t pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(pool);
  if (it == g_pools.end()) return;
  it->second.users -= 1;
  if (it->second.users <= 0 && it->second.live_blocks == 0) {
    for (auto& dev : devices()) release_free_blocks(dev, pool);
    g_pools.erase(it);
  }
}

int64_t exchange_thread_pool(int64_t pool) {
  int64_t previous = tls_pool;
  tls_pool = pool;
  return previous;
}

PoolAllocationScope::PoolAllocationScope(int64_t pool) : previous(tls_pool) { tls_pool = pool; }
PoolAllocationScope::~PoolAllocationScope() { tls_pool = previous; }

CpuAllocationRedirect::CpuAllocationRedirect(c10::DeviceIndex device) : previous(tls_redirect_device) {
  tls_redirect_device = device;
}
CpuAllocationRedirect::~CpuAllocationRedirect() { tls_redirect_device = previous; }

void install_allocators() {
  // The npu allocator serves storages created directly (torch.UntypedStorage(n, device="npu")).
  c10::SetAllocator(kNpu, &g_npu_allocator);
  install_cpu_allocation_redirect();
}

void install_cpu_allocation_redirect() {
  static RedirectingCpuAllocator* redirect = [] {
    auto* r = new RedirectingCpuAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(r, /*priority=*/1);
    return r;
  }();
  (void)redirect;
}

}  // namespace torch_npu
