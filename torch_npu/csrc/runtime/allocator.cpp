// Caching allocator for simulated device memory (host RAM).
//
// It follows the block/segment model of CUDA's caching allocator, because that model
// decides the numbers users read (memory_reserved, inactive_split, num_alloc_retries,
// when an OOM happens): a request is rounded (512 B, or power-of-two divisions), served
// from a small pool (<= 1 MiB, 2 MiB segments) or a large pool (20 MiB segments below
// 10 MiB, else the request rounded to 2 MiB); cached blocks are best-fit per stream and
// split when the remainder is worth keeping; freed neighbours merge; a failed segment
// allocation frees oversize cached blocks, then every unsplit cached block, and retries.
// PYTORCH_NPU_ALLOC_CONF takes PYTORCH_CUDA_ALLOC_CONF's keys (max_split_size_mb,
// garbage_collection_threshold, expandable_segments, roundup_power2_divisions).
// Expandable segments reserve address space per stream and map 2/20 MiB pages into it,
// so they grow instead of multiplying and give free pages back from inside split memory.
// Segments and pages are mapped from the device's memory file (device_memory_file.h), so
// that another process can map an npu tensor's bytes (torch.multiprocessing).
//
// Where the simulator differs: work on every stream has finished by the time the host
// frees a tensor, so record_stream never delays reuse; a graph pool's memory goes back
// as soon as no graph uses it and its last block is freed, where CUDA waits for the
// next empty_cache().
// PYTORCH_NO_NPU_MEMORY_CACHING=1 (as PYTORCH_NO_CUDA_MEMORY_CACHING) turns caching off:
// a freed block whose segment (or expandable page) is wholly free goes back at once, so
// memory_reserved() follows memory_allocated(); graph pools still keep their memory.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/device_model.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/env_settings.h"
#include "torch_npu/csrc/runtime/device_memory_file.h"
#include "torch_npu/csrc/runtime/node_free_list.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <c10/util/flat_hash_map.h>
#include <c10/util/llvmMathExtras.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace torch_npu {

using c10::CachingAllocator::format_size;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

namespace {

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;         // largest request of the small pool
constexpr size_t kSmallBuffer = 2 << 20;       // small pool segment
constexpr size_t kLargeBuffer = 20 << 20;      // large pool segment for requests < 10 MiB
constexpr size_t kMinLargeAlloc = 10 << 20;    // from here a request gets its own segment
constexpr size_t kRoundLarge = 2 << 20;        // ... rounded to 2 MiB
constexpr size_t kRoundupIntervals = 16;       // power-of-two buckets from 1 MiB

// ---- configuration (PYTORCH_NPU_ALLOC_CONF) ----------------------------------------

struct AllocatorConfig {
  size_t max_split_size = std::numeric_limits<size_t>::max();
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  std::vector<size_t> roundup_power2_divisions = std::vector<size_t>(kRoundupIntervals, 0);
  std::string settings;
};

AllocatorConfig g_config;
bool g_no_caching = false;  // PYTORCH_NO_NPU_MEMORY_CACHING=1

[[noreturn]] void config_error(const std::string& settings, const std::string& why) {
  TORCH_CHECK(false, "Invalid PYTORCH_NPU_ALLOC_CONF='", settings, "': ", why,
              ". It takes comma-separated key:value pairs with the keys of PYTORCH_CUDA_ALLOC_CONF: "
              "max_split_size_mb (> 20), garbage_collection_threshold (0.0 < t < 1.0), "
              "expandable_segments (True/False), roundup_power2_divisions (a power of 2, or "
              "[size_mb:divisions,...,>:divisions]), backend (native); page_size and "
              "base_addr_aligned_kb are accepted and have no effect on the simulator");
}

size_t parse_size(const std::string& settings, const std::string& key, const std::string& v) {
  std::optional<int64_t> n = env_settings::parse_integer(v, 0, std::numeric_limits<int64_t>::max());
  if (!n) config_error(settings, "'" + key + "' needs a non-negative integer, got '" + v + "'");
  return static_cast<size_t>(*n);
}

size_t parse_divisions(const std::string& settings, const std::string& v) {
  size_t d = parse_size(settings, "roundup_power2_divisions", v);
  if (d != 0 && !c10::llvm::isPowerOf2_64(d)) {
    config_error(settings, "roundup_power2_divisions values must be powers of 2, got " + v);
  }
  return d;
}

// Splits on commas that are not inside brackets.
std::vector<std::string> split_options(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') depth++;
    if (c == ']') depth--;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

AllocatorConfig parse_config(const std::string& settings) {
  AllocatorConfig cfg;
  cfg.settings = settings;
  for (const std::string& option : split_options(settings)) {
    auto colon = option.find(':');
    if (colon == std::string::npos) config_error(settings, "'" + option + "' has no ':value'");
    std::string key = option.substr(0, colon);
    std::string value = option.substr(colon + 1);
    if (key == "max_split_size_mb") {
      // Up to what memory_stats() can report (an int64 of bytes); CUDA wraps "-5" around.
      constexpr int64_t kMaxSplitMb = std::numeric_limits<int64_t>::max() >> 20;
      std::optional<int64_t> mb = env_settings::parse_integer(value, kLargeBuffer / (1 << 20) + 1, kMaxSplitMb);
      if (!mb) {
        config_error(settings, "max_split_size_mb must be > 20 (an integer number of MiB, at most " +
                                   std::to_string(kMaxSplitMb) + "), got '" + value + "'");
      }
      cfg.max_split_size = static_cast<size_t>(*mb) << 20;
    } else if (key == "garbage_collection_threshold") {
      char* end = nullptr;
      double t = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(t > 0.0 && t < 1.0)) {
        config_error(settings, "garbage_collection_threshold must be in (0.0, 1.0), got '" + value + "'");
      }
      cfg.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      if (value == "True" || value == "true" || value == "1") {
        cfg.expandable_segments = true;
      } else if (value == "False" || value == "false" || value == "0") {
        cfg.expandable_segments = false;
      } else {
        config_error(settings, "expandable_segments takes True or False, got '" + value + "'");
      }
    } else if (key == "roundup_power2_divisions") {
      if (!value.empty() && value.front() == '[') {
        if (value.back() != ']') config_error(settings, "unbalanced '[' in roundup_power2_divisions");
        std::string body = value.substr(1, value.size() - 2);
        size_t last_index = 0;
        bool first = true;
        for (const std::string& item : split_options(body)) {
          auto c = item.find(':');
          if (c == std::string::npos) config_error(settings, "roundup_power2_divisions item '" + item + "' has no ':'");
          std::string k = item.substr(0, c);
          size_t d = parse_divisions(settings, item.substr(c + 1));
          if (k == ">") {
            for (size_t i = first ? 0 : last_index + 1; i < kRoundupIntervals; ++i) cfg.roundup_power2_divisions[i] = d;
            break;
          }
          size_t mb = parse_size(settings, "roundup_power2_divisions", k);
          if (!c10::llvm::isPowerOf2_64(mb)) config_error(settings, "roundup_power2_divisions sizes must be powers of 2 (MB)");
          size_t index = std::min<size_t>(c10::llvm::Log2_64(mb), kRoundupIntervals - 1);
          for (size_t i = first ? 0 : last_index + 1; i <= index; ++i) cfg.roundup_power2_divisions[i] = d;
          last_index = index;
          first = false;
        }
      } else {
        size_t d = parse_divisions(settings, value);
        std::fill(cfg.roundup_power2_divisions.begin(), cfg.roundup_power2_divisions.end(), d);
      }
    } else if (key == "backend") {
      if (value != "native") config_error(settings, "the only backend is 'native', got '" + value + "'");
    } else if (key == "page_size" || key == "base_addr_aligned_kb") {
      // Ascend hardware knobs (huge pages, segment base alignment): no effect on host memory.
    } else {
      config_error(settings, "unrecognized key '" + key + "'");
    }
  }
  return cfg;
}

// ---- blocks, pools, segments ----------------------------------------------------------

struct Block;
struct PrivatePool;
struct ExpandableSegment;

// Orders of the block sets, as types so that the comparisons inline into the set's search.
struct BySize {
  bool operator()(const Block* a, const Block* b) const;
};
struct ByAddress {
  bool operator()(const Block* a, const Block* b) const;
};
// The sets of free blocks: every operator's output takes a block from one and its free puts
// one back, so their tree nodes come from a free list instead of malloc (set_node_cache.h).
using SizeOrdered = std::set<Block*, BySize, CachedNodeAllocator<Block*>>;
using AddressOrdered = std::set<Block*, ByAddress, CachedNodeAllocator<Block*>>;

struct BlockPool {
  BlockPool(bool small, PrivatePool* owner_pool) : is_small(small), owner(owner_pool) {}
  SizeOrdered blocks;       // free, mapped blocks
  AddressOrdered unmapped;  // unmapped address ranges of expandable segments
  bool is_small;
  PrivatePool* owner;
  int64_t get_free_blocks_call_count = 0;
  std::pair<SizeOrdered::iterator, bool> insert_into_blocks(Block* b);
};

struct Block {
  Block(c10::DeviceIndex d, int64_t s, size_t n, BlockPool* p, char* address)
      : device(d), stream(s), size(n), pool(p), ptr(address) {}
  // Search key.
  Block(c10::DeviceIndex d, int64_t s, size_t n) : device(d), stream(s), size(n), pool(nullptr), ptr(nullptr) {}
  // Blocks are made and dropped on most allocations and frees (splits, merges), always
  // under the allocator's mutex: their memory is recycled (node_free_list.h).
  static void* operator new(size_t bytes) {
    TORCH_INTERNAL_ASSERT(bytes == sizeof(Block));
    return ChunkFreeList<sizeof(Block)>::take();
  }
  static void operator delete(void* p) { ChunkFreeList<sizeof(Block)>::give(p); }
  c10::DeviceIndex device;
  int64_t stream;
  size_t size;
  size_t requested_size = 0;
  BlockPool* pool;
  char* ptr;
  bool allocated = false;
  bool mapped = true;
  Block* prev = nullptr;
  Block* next = nullptr;
  int64_t gc_count_base = 0;
  ExpandableSegment* expandable = nullptr;
  std::shared_ptr<c10::GatheredContext> context_when_allocated;
  std::shared_ptr<c10::GatheredContext> context_when_segment_allocated;

  bool is_split() const { return prev != nullptr || next != nullptr; }
  int64_t gc_count() const { return pool->get_free_blocks_call_count - gc_count_base; }
  void splice(Block* before, Block* after) {
    if (before) before->next = this;
    prev = before;
    if (after) after->prev = this;
    next = after;
  }
};

inline bool BySize::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}
inline bool ByAddress::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

std::pair<SizeOrdered::iterator, bool> BlockPool::insert_into_blocks(Block* b) {
  b->gc_count_base = get_free_blocks_call_count;
  return blocks.insert(b);
}

struct PrivatePool {
  explicit PrivatePool(int64_t pool_id) : id(pool_id), large(false, this), small(true, this) {}
  int64_t id;
  BlockPool large;
  BlockPool small;
  int64_t segments = 0;
};

struct SegmentRange {
  char* ptr;
  size_t size;
};

struct DeviceCache;

// Address space reserved once and backed page by page with pages of the device's memory
// file (device_memory_file.h), as cuMemMap backs a virtual reservation.
struct ExpandableSegment {
  ExpandableSegment(c10::DeviceIndex d, int64_t s, size_t page, size_t max_bytes)
      : device(d), stream(s), page_size(page) {
    pages = (max_bytes + page - 1) / page;
    void* p = mmap(nullptr, pages * page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "could not reserve address space for an expandable segment");
    base = static_cast<char*>(p);
    page_file_offsets.assign(pages, -1);
  }
  ~ExpandableSegment() { munmap(base, pages * page_size); }
  size_t size() const { return pages * page_size; }
  // Backs the pages covering `r` (which starts on a page); returns what was mapped,
  // or an empty range when the device has no room for it.
  SegmentRange map(SegmentRange r, size_t room) {
    size_t begin = (r.ptr - base) / page_size;
    size_t end = (r.ptr + r.size - base + page_size - 1) / page_size;
    size_t bytes = (end - begin) * page_size;
    if (begin == end || bytes > room) return {r.ptr, 0};
    for (size_t i = begin; i < end; ++i) {
      if (device_memory_file::map(device, page_size, base + i * page_size, &page_file_offsets[i]) == nullptr) {
        for (size_t j = begin; j < i; ++j) unmap_page(j);
        return {r.ptr, 0};
      }
    }
    return {base + begin * page_size, bytes};
  }
  // Releases the whole pages inside `r`; returns what was released.
  SegmentRange unmap(SegmentRange r) {
    size_t begin = (r.ptr - base + page_size - 1) / page_size;
    size_t end = (r.ptr + r.size - base) / page_size;
    if (begin >= end) return {r.ptr, 0};
    for (size_t i = begin; i < end; ++i) unmap_page(i);
    return {base + begin * page_size, (end - begin) * page_size};
  }
  void unmap_page(size_t i) {
    device_memory_file::unmap(device, base + i * page_size, page_size, page_file_offsets[i], /*keep_reservation=*/true);
    page_file_offsets[i] = -1;
  }
  c10::DeviceIndex device;
  int64_t stream;
  size_t page_size;
  size_t pages = 0;
  char* base = nullptr;
  std::vector<int64_t> page_file_offsets;  // where each mapped page lives in the memory file; -1 unmapped
};

struct AllocParams {
  AllocParams(c10::DeviceIndex d, size_t n, int64_t s, BlockPool* p, size_t alloc)
      : search_key(d, s, n), pool(p), alloc_size(alloc) {}
  c10::DeviceIndex device() const { return search_key.device; }
  int64_t stream() const { return search_key.stream; }
  size_t size() const { return search_key.size; }
  Block search_key;
  BlockPool* pool;
  size_t alloc_size;
  Block* block = nullptr;
  StatTypes stat_types = {false};
  bool host_failed = false;
};

// Who uses each memory pool (graphs, MemPools) and how many of its blocks are live.
struct PoolUse {
  int64_t users = 0;
  int64_t live_blocks = 0;
};

// ---- memory history ------------------------------------------------------------------

std::atomic<CreateContextFn> g_context_fn{nullptr};
std::atomic<int> g_record_context{static_cast<int>(RecordContext::NEVER)};
std::atomic<bool> g_record_history{false};
size_t g_max_entries = 1;
uint32_t g_skip_actions = 0;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct DeviceCache {
  explicit DeviceCache(c10::DeviceIndex index, size_t cap) : device(index), capacity(cap) {}
  c10::DeviceIndex device;
  DeviceStats stats;
  BlockPool large{false, nullptr};
  BlockPool small{true, nullptr};
  std::map<int64_t, std::unique_ptr<PrivatePool>> private_pools;
  std::vector<ExpandableSegment*> expandable;
  size_t reserved = 0;  // bytes of segments (mapped pages for expandable ones)
  size_t capacity;
  bool set_fraction = false;
  double fraction = 1.0;
  size_t allowed = 0;
  std::vector<TraceEntry> trace;
  size_t trace_next = 0;
};

// The allocator's state is never destroyed: threads that outlive static destruction at exit
// (a process group's worker, autograd's device threads) still free npu tensors, and a free
// must find the state it came from.
std::mutex& g_mutex = *new std::mutex;
std::vector<std::unique_ptr<DeviceCache>>& g_caches = *new std::vector<std::unique_ptr<DeviceCache>>;
bool g_initialized = false;
// Allocated blocks by address: a DataPtr's context is its address, as raw allocations need.
// Open addressing: no heap node per allocation.
ska::flat_hash_map<void*, Block*>& g_live = *new ska::flat_hash_map<void*, Block*>;
// Address ranges of device memory (segments and expandable reservations): base -> end, device.
std::map<uintptr_t, std::pair<uintptr_t, c10::DeviceIndex>>& g_ranges =
    *new std::map<uintptr_t, std::pair<uintptr_t, c10::DeviceIndex>>;
std::unordered_map<int64_t, PoolUse>& g_pool_use = *new std::unordered_map<int64_t, PoolUse>;
// Where each ordinary segment (by its base) lives in its device's memory file.
std::unordered_map<char*, int64_t>& g_segment_file_offsets = *new std::unordered_map<char*, int64_t>;
int64_t g_next_pool = 1;
thread_local int64_t tls_pool = 0;
thread_local c10::DeviceIndex tls_pool_device = -1;  // -1: the thread pool applies to every device

void init_locked() {
  if (g_initialized) return;
  AllocatorConfig cfg = parse_config(env_settings::read("PYTORCH_NPU_ALLOC_CONF").value_or(""));
  size_t capacity = static_cast<size_t>(device_profile().total_memory);
  // 1 TiB at most: the expandable segments reserve address space for 1 1/8 of it per stream.
  int64_t capacity_mb = env_settings::read_integer(
      "TORCH_NPU_MEMORY_CAPACITY_MB", 0, 1, int64_t{1} << 20,
      "an integer number of MiB from 1 to 1048576 (1 TiB), the memory of each simulated card "
      "(unset, it is the memory of the card TORCH_NPU_DEVICE_MODEL names)");
  if (capacity_mb > 0) capacity = static_cast<size_t>(capacity_mb) << 20;
  g_no_caching = env_settings::read_integer(
                     "PYTORCH_NO_NPU_MEMORY_CACHING", 0, 0, 1,
                     "0 (freed memory is cached for reuse, the default) or 1 (freed memory goes back at once)") == 1;
  std::vector<std::unique_ptr<DeviceCache>> caches;
  for (c10::DeviceIndex i = 0; i < device_count(); ++i) caches.push_back(std::make_unique<DeviceCache>(i, capacity));
  for (auto& c : caches) c->stats.max_split_size = static_cast<int64_t>(cfg.max_split_size);
  g_config = std::move(cfg);
  g_caches = std::move(caches);
  g_initialized = true;
}

DeviceCache& cache_locked(c10::DeviceIndex device) {
  init_locked();
  return *g_caches[device];
}

StatTypes stat_types_for(const BlockPool& pool) {
  StatTypes t = {false};
  t[static_cast<size_t>(StatType::AGGREGATE)] = true;
  t[static_cast<size_t>(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
  return t;
}

template <typename F>
void for_each(const StatTypes& types, F f) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i]) f(i);
  }
}

int64_t pool_id_of(const BlockPool* pool) { return pool->owner ? pool->owner->id : 0; }

c10::MempoolId_t mempool_of(const BlockPool* pool) {
  return {0, static_cast<c10::CaptureId_t>(pool_id_of(pool))};
}

std::shared_ptr<c10::GatheredContext> maybe_gather(RecordContext level) {
  if (g_record_context.load(std::memory_order_relaxed) < static_cast<int>(level)) return nullptr;
  CreateContextFn fn = g_context_fn.load();
  return fn ? fn() : nullptr;
}

void record_trace(DeviceCache& dc, TraceEntry::Action action, size_t addr, size_t size, int64_t stream,
                  int64_t pool, std::shared_ptr<c10::GatheredContext> ctx) {
  if (!g_record_history.load(std::memory_order_relaxed)) return;
  if (g_skip_actions & (1u << static_cast<unsigned>(action))) return;
  if (g_record_context.load() < static_cast<int>(RecordContext::ALLOC)) ctx = nullptr;
  TraceEntry te(action, dc.device, addr, size, reinterpret_cast<void*>(stream),
                {0, static_cast<c10::CaptureId_t>(pool)}, 0, std::move(ctx));
  te.time_.t_ = static_cast<time_t>(now_us());
  if (dc.trace.size() < g_max_entries) {
    dc.trace.emplace_back(std::move(te));
  } else {
    dc.trace[dc.trace_next++] = std::move(te);
    if (dc.trace_next >= g_max_entries) dc.trace_next = 0;
  }
}

// ---- the CUDA caching-allocator algorithm ------------------------------------------------

size_t roundup_power2_next_division(size_t size, size_t divisions) {
  if (c10::llvm::isPowerOf2_64(size)) return size;
  size_t power2_floor = c10::llvm::PowerOf2Floor(size);
  size_t power2_division = power2_floor >> (63 - c10::llvm::countLeadingZeros(divisions));
  if (power2_division == 0) return power2_floor << 1;
  size_t floor = size & ~(power2_division - 1);
  return floor == size ? size : floor + power2_division;
}

size_t round_size(size_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  size_t log_size = 63 - c10::llvm::countLeadingZeros(static_cast<uint64_t>(size));
  size_t index = log_size < 20 ? 0 : std::min<size_t>(log_size - 20, kRoundupIntervals - 1);
  size_t divisions = g_config.roundup_power2_divisions[index];
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

size_t allocation_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

BlockPool& get_pool(DeviceCache& dc, size_t size, int64_t pool_id) {
  if (pool_id != 0) {
    auto& pp = dc.private_pools[pool_id];
    if (!pp) pp = std::make_unique<PrivatePool>(pool_id);
    return size <= kSmallSize ? pp->small : pp->large;
  }
  return size <= kSmallSize ? dc.small : dc.large;
}

bool should_split(const Block* block, size_t size) {
  size_t remaining = block->size - size;
  if (block->pool->is_small || g_config.expandable_segments) return remaining >= kMinBlockSize;
  return size < g_config.max_split_size && remaining > kSmallSize;
}

bool get_free_block(DeviceCache& dc, AllocParams& p) {
  BlockPool& pool = *p.pool;
  if (dc.set_fraction && g_config.garbage_collection_threshold > 0.0) ++pool.get_free_blocks_call_count;
  auto it = pool.blocks.lower_bound(&p.search_key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream()) return false;
  if ((*it)->expandable) {
    if (g_config.expandable_segments) {
      // Best fit counts the unmapped room after a block as part of it.
      auto expandable_size = [](Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
      auto next = it;
      ++next;
      while ((*it)->expandable && next != pool.blocks.end() && (*next)->stream == p.stream() &&
             expandable_size(*next) < expandable_size(*it)) {
        it = next++;
      }
    } else {
      // Expandable segments were turned off after some were made: use only ordinary blocks.
      do {
        ++it;
      } while (it != pool.blocks.end() && (*it)->expandable && (*it)->stream == p.stream());
      if (it == pool.blocks.end() || (*it)->stream != p.stream()) return false;
    }
  }
  // No oversize block for a request below max_split_size, and an oversize request may
  // take a cached block at most kLargeBuffer larger than itself.
  if (p.size() < g_config.max_split_size && (*it)->size >= g_config.max_split_size) return false;
  if (p.size() >= g_config.max_split_size && (*it)->size >= p.size() + kLargeBuffer) return false;
  p.block = *it;
  pool.blocks.erase(it);
  return true;
}

void register_range(char* base, size_t size, c10::DeviceIndex device) {
  g_ranges[reinterpret_cast<uintptr_t>(base)] = {reinterpret_cast<uintptr_t>(base) + size, device};
}
void unregister_range(char* base) { g_ranges.erase(reinterpret_cast<uintptr_t>(base)); }

size_t try_merge_blocks(Block* dst, Block* src, BlockPool& pool) {
  if (!src || src->allocated || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
    dst->context_when_segment_allocated = std::move(src->context_when_segment_allocated);
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  size_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) {
    pool.blocks.erase(src);
  } else {
    pool.unmapped.erase(src);
  }
  delete src;
  return subsumed;
}

// Looks for the lowest address with room for `size` in an expandable segment of this
// stream and pool (free and unmapped blocks together); makes a new segment if none.
Block* find_expandable_block(DeviceCache& dc, int64_t stream, BlockPool* pool, size_t size) {
  Block key(dc.device, stream, 0);
  auto allocatable = [](Block* b) { return b && !b->allocated; };
  auto has_room = [&](Block* b) {
    size_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= size;
  };
  for (auto it = pool->unmapped.lower_bound(&key); it != pool->unmapped.end() && (*it)->stream == stream; ++it) {
    Block* c = *it;
    if (allocatable(c->prev)) c = c->prev;
    if (has_room(c)) return c;
  }
  size_t page = pool->is_small ? kSmallBuffer : kLargeBuffer;
  // CUDA reserves address space for 1 1/8 of the card's memory: the slack lets a request
  // map new pages past the end while free pages earlier in the segment stay unmapped.
  auto* es = new ExpandableSegment(dc.device, stream, page, dc.capacity + dc.capacity / 8);
  dc.expandable.push_back(es);
  register_range(es->base, es->size(), dc.device);
  Block* candidate = new Block(dc.device, stream, es->size(), pool, es->base);
  candidate->mapped = false;
  candidate->expandable = es;
  pool->unmapped.insert(candidate);
  return candidate;
}

size_t room_left(const DeviceCache& dc) {
  size_t limit = dc.set_fraction ? std::min(dc.allowed, dc.capacity) : dc.capacity;
  return dc.reserved >= limit ? 0 : limit - dc.reserved;
}

bool map_block(DeviceCache& dc, Block* to_map, size_t size, const std::shared_ptr<c10::GatheredContext>& ctx) {
  SegmentRange mapped = to_map->expandable->map({to_map->ptr, size}, room_left(dc));
  if (mapped.size == 0) return false;
  BlockPool& pool = *to_map->pool;
  pool.unmapped.erase(to_map);
  to_map->mapped = true;
  if (mapped.size < to_map->size) {
    Block* remaining = new Block(to_map->device, to_map->stream, to_map->size - mapped.size, &pool,
                                 to_map->ptr + mapped.size);
    remaining->mapped = false;
    remaining->expandable = to_map->expandable;
    remaining->splice(to_map, to_map->next);
    pool.unmapped.insert(remaining);
    to_map->size = mapped.size;
  }
  try_merge_blocks(to_map, to_map->prev, pool);
  try_merge_blocks(to_map, to_map->next, pool);
  pool.insert_into_blocks(to_map);
  dc.reserved += mapped.size;
  for_each(stat_types_for(pool), [&](size_t t) { dc.stats.reserved_bytes[t].increase(mapped.size); });
  dc.stats.num_device_alloc++;
  record_trace(dc, TraceEntry::SEGMENT_MAP, reinterpret_cast<size_t>(mapped.ptr), mapped.size, to_map->stream,
               pool_id_of(&pool), ctx);
  if (!to_map->prev && !to_map->context_when_segment_allocated) to_map->context_when_segment_allocated = ctx;
  return true;
}

Block* try_allocate_expandable_block(DeviceCache& dc, int64_t stream, BlockPool* pool, size_t size,
                                     const std::shared_ptr<c10::GatheredContext>& ctx) {
  Block* candidate = find_expandable_block(dc, stream, pool, size);
  if (!candidate->mapped && !map_block(dc, candidate, std::min(candidate->size, size), ctx)) return nullptr;
  while (candidate->size < size) {
    size_t remaining = size - candidate->size;
    Block* next = candidate->next;
    if (!map_block(dc, next, std::min(remaining, next->size), ctx)) return nullptr;
    candidate = next;
  }
  pool->blocks.erase(candidate);
  return candidate;
}

bool alloc_block(DeviceCache& dc, AllocParams& p, bool is_retry, const std::shared_ptr<c10::GatheredContext>& ctx) {
  size_t size = p.alloc_size;
  if (is_retry) dc.stats.num_alloc_retries += 1;
  if (dc.set_fraction && dc.reserved + size > dc.allowed) return false;
  if (g_config.expandable_segments && !p.pool->owner) {
    p.block = try_allocate_expandable_block(dc, p.stream(), p.pool, p.size(), ctx);
    return p.block != nullptr;
  }
  if (dc.reserved + size > dc.capacity) return false;
  int64_t file_offset = -1;
  void* ptr = device_memory_file::map(p.device(), size, nullptr, &file_offset);
  if (ptr == nullptr) {
    p.host_failed = true;
    return false;
  }
  g_segment_file_offsets[static_cast<char*>(ptr)] = file_offset;
  if (p.pool->owner) p.pool->owner->segments++;
  dc.reserved += size;
  p.block = new Block(p.device(), p.stream(), size, p.pool, static_cast<char*>(ptr));
  for_each(p.stat_types, [&](size_t t) {
    dc.stats.segment[t].increase(1);
    dc.stats.reserved_bytes[t].increase(size);
    if (p.pool->owner) dc.stats.reserved_bytes_by_private_pools[mempool_of(p.pool)][t].increase(size);
  });
  if (size >= g_config.max_split_size) dc.stats.oversize_segments.increase(1);
  dc.stats.num_device_alloc++;
  register_range(p.block->ptr, size, p.device());
  record_trace(dc, TraceEntry::SEGMENT_ALLOC, reinterpret_cast<size_t>(ptr), size, p.stream(),
               pool_id_of(p.pool), ctx);
  p.block->context_when_segment_allocated = ctx;
  return true;
}

void release_block(DeviceCache& dc, Block* block, const std::shared_ptr<c10::GatheredContext>& ctx) {
  dc.stats.num_device_free++;
  record_trace(dc, TraceEntry::SEGMENT_FREE, reinterpret_cast<size_t>(block->ptr), block->size, block->stream,
               pool_id_of(block->pool), ctx ? ctx : block->context_when_segment_allocated);
  unregister_range(block->ptr);
  auto file_offset = g_segment_file_offsets.find(block->ptr);
  device_memory_file::unmap(dc.device, block->ptr, block->size, file_offset->second, /*keep_reservation=*/false);
  g_segment_file_offsets.erase(file_offset);
  dc.reserved -= block->size;
  BlockPool* pool = block->pool;
  if (pool->owner) pool->owner->segments--;
  for_each(stat_types_for(*pool), [&](size_t t) {
    dc.stats.segment[t].decrease(1);
    dc.stats.reserved_bytes[t].decrease(block->size);
    if (pool->owner) dc.stats.reserved_bytes_by_private_pools[mempool_of(pool)][t].decrease(block->size);
  });
  if (block->size >= g_config.max_split_size) dc.stats.oversize_segments.decrease(1);
  pool->blocks.erase(block);
  delete block;
}

void unmap_block(DeviceCache& dc, Block* block, const std::shared_ptr<c10::GatheredContext>& ctx) {
  SegmentRange unmapped = block->expandable->unmap({block->ptr, block->size});
  if (unmapped.size == 0) return;
  BlockPool& pool = *block->pool;
  pool.blocks.erase(block);
  ptrdiff_t before_size = unmapped.ptr - block->ptr;
  if (before_size > 0) {
    Block* before = new Block(block->device, block->stream, before_size, &pool, block->ptr);
    before->expandable = block->expandable;
    before->splice(block->prev, block);
    pool.insert_into_blocks(before);
  }
  size_t after_size = block->size - (before_size + unmapped.size);
  if (after_size > 0) {
    Block* after = new Block(block->device, block->stream, after_size, &pool, unmapped.ptr + unmapped.size);
    after->expandable = block->expandable;
    after->splice(block, block->next);
    pool.insert_into_blocks(after);
  }
  block->ptr = unmapped.ptr;
  block->size = unmapped.size;
  block->mapped = false;
  try_merge_blocks(block, block->prev, pool);
  try_merge_blocks(block, block->next, pool);
  pool.unmapped.insert(block);
  dc.reserved -= unmapped.size;
  for_each(stat_types_for(pool), [&](size_t t) { dc.stats.reserved_bytes[t].decrease(unmapped.size); });
  dc.stats.num_device_free++;
  record_trace(dc, TraceEntry::SEGMENT_UNMAP, reinterpret_cast<size_t>(unmapped.ptr), unmapped.size, block->stream,
               pool_id_of(&pool), ctx ? ctx : block->context_when_segment_allocated);
}

void release_expandable_segment(DeviceCache& dc, Block* block) {
  ExpandableSegment* es = block->expandable;
  auto it = std::find(dc.expandable.begin(), dc.expandable.end(), es);
  if (it != dc.expandable.end()) dc.expandable.erase(it);
  block->pool->unmapped.erase(block);
  unregister_range(es->base);
  delete es;
  delete block;
}

void release_blocks(DeviceCache& dc, BlockPool& pool, const std::shared_ptr<c10::GatheredContext>& ctx) {
  std::vector<Block*> to_unmap;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* b = *it;
    ++it;
    if (b->expandable) {
      to_unmap.push_back(b);
    } else if (!b->is_split()) {
      release_block(dc, b, ctx);
    }
  }
  for (Block* b : to_unmap) {
    unmap_block(dc, b, ctx);
    if (!b->mapped && !b->is_split()) release_expandable_segment(dc, b);
  }
}

void release_private_pool_locked(int64_t pool_id, const std::shared_ptr<c10::GatheredContext>& ctx) {
  for (auto& dcp : g_caches) {
    auto it = dcp->private_pools.find(pool_id);
    if (it == dcp->private_pools.end()) continue;
    release_blocks(*dcp, it->second->small, ctx);
    release_blocks(*dcp, it->second->large, ctx);
    if (it->second->segments == 0) dcp->private_pools.erase(it);
  }
}

bool release_cached_blocks(DeviceCache& dc, const std::shared_ptr<c10::GatheredContext>& ctx) {
  // Every stream's work has finished on the simulator: the synchronisation is free.
  dc.stats.num_sync_all_streams++;
  release_blocks(dc, dc.large, ctx);
  release_blocks(dc, dc.small, ctx);
  return true;
}

// Frees oversize cached blocks (>= max_split_size), just enough for the request.
bool release_available_cached_blocks(DeviceCache& dc, const AllocParams& p,
                                     const std::shared_ptr<c10::GatheredContext>& ctx) {
  if (g_config.max_split_size == std::numeric_limits<size_t>::max()) return false;
  BlockPool& pool = *p.pool;
  Block key(p.device(), p.stream(), std::max(p.size(), g_config.max_split_size));
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream() || (*it)->expandable) {
    if (it == pool.blocks.begin()) return false;
    size_t released = 0;
    --it;
    while (released < key.size && (*it)->size >= g_config.max_split_size && (*it)->stream == p.stream() &&
           !(*it)->expandable) {
      auto cur = it;
      released += (*it)->size;
      if (it != pool.blocks.begin()) {
        --it;
        release_block(dc, *cur, ctx);
      } else {
        release_block(dc, *cur, ctx);
        break;
      }
    }
    return released >= key.size;
  }
  release_block(dc, *it, ctx);
  return true;
}

void garbage_collect_cached_blocks(DeviceCache& dc, const std::shared_ptr<c10::GatheredContext>& ctx) {
  size_t threshold = static_cast<size_t>(g_config.garbage_collection_threshold * static_cast<double>(dc.allowed));
  if (dc.reserved <= threshold) return;
  size_t target = dc.reserved - threshold;
  size_t reclaimed = 0;
  double total_age = 0.0;
  int freeable = 0;
  for (Block* b : dc.large.blocks) {
    if (!b->is_split() && !b->expandable) {
      total_age += static_cast<double>(b->gc_count());
      ++freeable;
    }
  }
  if (freeable == 0) return;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    double age_threshold = total_age / freeable;
    freed = false;
    for (auto it = dc.large.blocks.begin(); it != dc.large.blocks.end();) {
      Block* b = *it;
      ++it;
      if (!b->is_split() && !b->expandable && static_cast<double>(b->gc_count()) >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= static_cast<double>(b->gc_count());
        --freeable;
        release_block(dc, b, ctx);
      }
    }
  }
}

Block* alloc_found_block(DeviceCache& dc, AllocParams& p, size_t orig_size, std::shared_ptr<c10::GatheredContext> ctx) {
  Block* block = p.block;
  BlockPool* pool = p.pool;
  const bool already_split = block->is_split();
  if (should_split(block, p.size())) {
    Block* remaining = block;
    block = new Block(p.device(), p.stream(), p.size(), pool, remaining->ptr);
    block->expandable = remaining->expandable;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    remaining->ptr += p.size();
    remaining->size -= p.size();
    pool->insert_into_blocks(remaining);
    if (already_split && !block->expandable) {
      for_each(p.stat_types, [&](size_t t) { dc.stats.inactive_split_bytes[t].decrease(block->size); });
    } else if (!block->expandable) {
      for_each(p.stat_types, [&](size_t t) {
        dc.stats.inactive_split_bytes[t].increase(remaining->size);
        dc.stats.inactive_split[t].increase(1);
      });
    }
  } else if (already_split && !block->expandable) {
    for_each(p.stat_types, [&](size_t t) {
      dc.stats.inactive_split_bytes[t].decrease(block->size);
      dc.stats.inactive_split[t].decrease(1);
    });
  }
  block->allocated = true;
  block->requested_size = orig_size;
  block->context_when_allocated = std::move(ctx);
  record_trace(dc, TraceEntry::ALLOC, reinterpret_cast<size_t>(block->ptr), orig_size, block->stream,
               pool_id_of(pool), block->context_when_allocated);
  g_live.emplace(block->ptr, block);
  if (pool->owner) g_pool_use[pool->owner->id].live_blocks += 1;
  for_each(p.stat_types, [&](size_t t) {
    dc.stats.allocation[t].increase(1);
    dc.stats.allocated_bytes[t].increase(block->size);
    dc.stats.active[t].increase(1);
    dc.stats.active_bytes[t].increase(block->size);
    dc.stats.requested_bytes[t].increase(block->requested_size);
  });
  if (block->size >= g_config.max_split_size) dc.stats.oversize_allocations.increase(1);
  return block;
}

// Moves a freed block back into its pool, merging it with free neighbours.
void free_block(DeviceCache& dc, Block* block, const std::shared_ptr<c10::GatheredContext>& ctx) {
  record_trace(dc, TraceEntry::FREE_COMPLETED, reinterpret_cast<size_t>(block->ptr), block->requested_size,
               block->stream, pool_id_of(block->pool), ctx ? ctx : block->context_when_allocated);
  block->context_when_allocated = nullptr;
  size_t original_size = block->size;
  size_t requested = block->requested_size;
  BlockPool& pool = *block->pool;
  int64_t net_blocks = 0;
  int64_t net_bytes = 0;
  for (Block* candidate : {block->prev, block->next}) {
    size_t subsumed = try_merge_blocks(block, candidate, pool);
    if (subsumed > 0) {
      net_blocks -= 1;
      net_bytes -= static_cast<int64_t>(subsumed);
    }
  }
  pool.insert_into_blocks(block);
  if (block->is_split()) {
    net_blocks += 1;
    net_bytes += static_cast<int64_t>(block->size);
  }
  for_each(stat_types_for(pool), [&](size_t t) {
    // Free pages of expandable segments can always be released: they are never "inactive split".
    if (!block->expandable) {
      if (net_blocks > 0) dc.stats.inactive_split[t].increase(net_blocks);
      if (net_blocks < 0) dc.stats.inactive_split[t].decrease(-net_blocks);
      if (net_bytes > 0) dc.stats.inactive_split_bytes[t].increase(net_bytes);
      if (net_bytes < 0) dc.stats.inactive_split_bytes[t].decrease(-net_bytes);
    }
    dc.stats.active[t].decrease(1);
    dc.stats.active_bytes[t].decrease(original_size);
    dc.stats.requested_bytes[t].decrease(requested);
  });
}

[[noreturn]] void raise_out_of_memory(DeviceCache& dc, AllocParams& p, std::shared_ptr<c10::GatheredContext> ctx,
                                      std::unique_lock<std::mutex>& lock) {
  size_t device_free = dc.capacity > dc.reserved ? dc.capacity - dc.reserved : 0;
  record_trace(dc, TraceEntry::OOM, device_free, p.size(), p.stream(), pool_id_of(p.pool), std::move(ctx));
  dc.stats.num_ooms += 1;
  auto allocated = dc.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
  auto reserved = dc.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
  c10::Device device(kNpu, dc.device);
  std::string allowed = dc.set_fraction ? format_size(dc.allowed) + " allowed; " : "";
  size_t capacity = dc.capacity;
  size_t alloc_size = p.alloc_size;
  bool host_failed = p.host_failed;
  lock.unlock();
  c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(p.size()), allocated, reserved, device);
  if (host_failed) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory on npu:", static_cast<int>(dc.device),
                     ": the host could not provide ", format_size(alloc_size),
                     " of RAM for the simulated device memory.");
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Tried to allocate ", format_size(alloc_size),
                   ". npu:", static_cast<int>(dc.device), " has a total capacity of ", format_size(capacity),
                   " of which ", format_size(device_free), " is free. ", allowed, "Of the allocated memory ",
                   format_size(allocated), " is allocated by PyTorch, and ", format_size(reserved - allocated),
                   " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
                   "setting PYTORCH_NPU_ALLOC_CONF=expandable_segments:True to avoid fragmentation. The "
                   "capacity comes from TORCH_NPU_MEMORY_CAPACITY_MB or the card named by TORCH_NPU_DEVICE_MODEL.");
}

Block* malloc_block(c10::DeviceIndex device, size_t orig_size, int64_t stream) {
  // Gathered before the lock: the context recorder takes the GIL.
  auto ctx = maybe_gather(RecordContext::STATE);
  std::unique_lock<std::mutex> lock(g_mutex);
  DeviceCache& dc = cache_locked(device);
  // During a capture, memory for work queued on the captured stream comes from its pool.
  const int64_t capture_pool = capture_pool_for_allocation(device);
  int64_t pool_id = tls_pool != 0 && (tls_pool_device < 0 || tls_pool_device == device) ? tls_pool : capture_pool;
  // A graph's pool serves whatever stream its capture runs on (autograd's device
  // thread included), so its blocks are not keyed by stream.
  if (pool_id != 0) stream = 0;
  size_t size = round_size(orig_size);
  BlockPool& pool = get_pool(dc, size, pool_id);
  AllocParams params(device, size, stream, &pool, allocation_size(size));
  params.stat_types = stat_types_for(pool);
  bool found = get_free_block(dc, params);
  if (!found) {
    if (dc.set_fraction && g_config.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks(dc, ctx);
    found = alloc_block(dc, params, false, ctx) ||
            (release_available_cached_blocks(dc, params, ctx) && alloc_block(dc, params, false, ctx)) ||
            (capture_pool == 0 && release_cached_blocks(dc, ctx) && alloc_block(dc, params, true, ctx));
  }
  if (!found) raise_out_of_memory(dc, params, std::move(ctx), lock);
  Block* block = alloc_found_block(dc, params, orig_size, std::move(ctx));
  auto allocated = dc.stats.allocated_bytes[0].current;
  auto reserved = dc.stats.reserved_bytes[0].current;
  lock.unlock();
  c10::reportMemoryUsageToProfiler(block->ptr, static_cast<int64_t>(block->size), allocated, reserved,
                                   c10::Device(kNpu, device));
  observe::on_block_allocated(block->ptr, block->size, device);  // the stream sanitizer
  return block;
}

void maybe_release_unused_pool_locked(int64_t pool_id) {
  auto it = g_pool_use.find(pool_id);
  if (it == g_pool_use.end() || it->second.users > 0 || it->second.live_blocks > 0) return;
  release_private_pool_locked(pool_id, nullptr);
  g_pool_use.erase(it);
}

void free_allocated_locked(Block* block, const std::shared_ptr<c10::GatheredContext>& ctx,
                           int64_t* allocated, int64_t* reserved) {
  DeviceCache& dc = *g_caches[block->device];
  block->allocated = false;
  StatTypes types = stat_types_for(*block->pool);
  for_each(types, [&](size_t t) {
    dc.stats.allocation[t].decrease(1);
    dc.stats.allocated_bytes[t].decrease(block->size);
  });
  record_trace(dc, TraceEntry::FREE_REQUESTED, reinterpret_cast<size_t>(block->ptr), block->requested_size,
               block->stream, pool_id_of(block->pool), ctx ? ctx : block->context_when_allocated);
  if (block->size >= g_config.max_split_size) dc.stats.oversize_allocations.decrease(1);
  PrivatePool* owner = block->pool->owner;
  free_block(dc, block, ctx);
  if (g_no_caching && !owner) {
    if (block->expandable) {
      unmap_block(dc, block, ctx);
      if (!block->mapped && !block->is_split()) release_expandable_segment(dc, block);
    } else if (!block->is_split()) {
      release_block(dc, block, ctx);
    }
  }
  *allocated = dc.stats.allocated_bytes[0].current;
  *reserved = dc.stats.reserved_bytes[0].current;
  if (owner) {
    int64_t id = owner->id;
    g_pool_use[id].live_blocks -= 1;
    maybe_release_unused_pool_locked(id);
  }
}

void free_ptr(void* ptr) {
  auto ctx = maybe_gather(RecordContext::ALL);
  int64_t allocated = 0;
  int64_t reserved = 0;
  c10::DeviceIndex device = 0;
  int64_t size = 0;
  int64_t pool = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_live.find(ptr);
    TORCH_INTERNAL_ASSERT(it != g_live.end(), "freeing npu memory that is not live");
    Block* b = it->second;
    g_live.erase(it);
    device = b->device;
    size = static_cast<int64_t>(b->size);
    pool = pool_id_of(b->pool);
    free_allocated_locked(b, ctx, &allocated, &reserved);
  }
  c10::reportMemoryUsageToProfiler(ptr, -size, allocated, reserved, c10::Device(kNpu, device));
  observe::on_block_freed(ptr, pool);  // the stream sanitizer
}

void free_block_deleter(void* ptr) { free_ptr(ptr); }

// Frees memory from either the device or the host CPU allocator, for raw deallocations
// made through the CPU allocator while it may be redirected.
c10::DeleterFnPtr g_base_cpu_raw_deleter = nullptr;
void free_device_or_host(void* ptr) {
  bool is_device;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    is_device = g_live.count(ptr) > 0;
  }
  if (is_device) {
    free_ptr(ptr);
  } else {
    g_base_cpu_raw_deleter(ptr);
  }
}

int64_t current_stream_id(c10::DeviceIndex device) { return current_stream(device).id(); }

class NpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    return allocate_device_memory(nbytes, device, c10::Device(kNpu, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block_deleter; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { std::memcpy(dest, src, count); }
  bool initialized() override {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_initialized;
  }
  void emptyCache(c10::MempoolId_t mempool_id) override {
    if (mempool_id.first == 0 && mempool_id.second == 0) {
      empty_cache();
    } else {
      std::lock_guard<std::mutex> lock(g_mutex);
      release_private_pool_locked(static_cast<int64_t>(mempool_id.second | mempool_id.first), nullptr);
    }
  }
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {
    // Kernels complete on the host before it frees anything: no cross-stream hazard to defer.
  }
  DeviceStats getDeviceStats(c10::DeviceIndex device) override { return device_stats(device); }
  void resetAccumulatedStats(c10::DeviceIndex device) override { reset_accumulated_memory_stats(device); }
  void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory_stats(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto info = mem_get_info(device);
    return {static_cast<size_t>(info.first), static_cast<size_t>(info.second)};
  }
};

NpuAllocator g_npu_allocator;

// CPU allocator that serves device memory while a CPU kernel runs for a device.
thread_local c10::DeviceIndex tls_redirect_device = -1;

class RedirectingCpuAllocator final : public c10::Allocator {
 public:
  explicit RedirectingCpuAllocator(c10::Allocator* base) : base_(base) { g_base_cpu_raw_deleter = base->raw_deleter(); }
  c10::DataPtr allocate(size_t nbytes) override {
    if (tls_redirect_device >= 0) return allocate_device_memory(nbytes, tls_redirect_device, c10::Device(c10::kCPU));
    return base_->allocate(nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_or_host; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { std::memcpy(dest, src, count); }

 private:
  c10::Allocator* base_;
};

void check_initialized_device(c10::DeviceIndex device, const char* what) { check_device_index(device, what); }

}  // namespace

// ---- public surface ------------------------------------------------------------------------

void init_allocator() {
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked();
}

bool allocator_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_initialized;
}

c10::Allocator* npu_allocator() { return &g_npu_allocator; }

at::Tensor empty_strided_npu_tensor(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype,
                                    c10::DeviceIndex device) {
  const c10::DeviceIndex previous = current_device();
  if (device != previous) set_current_device(device);
  try {
    at::Tensor t = at::detail::empty_strided_generic(size, stride, npu_allocator(),
                                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
    if (device != previous) set_current_device(previous);
    return t;
  } catch (...) {
    if (device != previous) set_current_device(previous);
    throw;
  }
}

c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device, c10::Device reported_device) {
  lazy_init();
  check_device_index(device, "memory allocation");
  if (nbytes == 0) return {nullptr, nullptr, &free_block_deleter, reported_device};
  Block* b = malloc_block(device, nbytes, current_stream_id(device));
  return {b->ptr, b->ptr, &free_block_deleter, reported_device};
}

void* raw_alloc(size_t nbytes, c10::DeviceIndex device, int64_t stream) {
  lazy_init();
  check_device_index(device, "caching_allocator_alloc");
  if (nbytes == 0) return nullptr;
  return malloc_block(device, nbytes, stream)->ptr;
}

void raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    TORCH_CHECK(g_live.count(ptr) > 0, "caching_allocator_delete: ", ptr,
                " is not the start of a live npu allocation (was it already freed, or is it a view's pointer?)");
  }
  free_ptr(ptr);
}

std::optional<c10::DeviceIndex> device_of_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = g_ranges.upper_bound(p);
  if (it == g_ranges.begin()) return std::nullopt;
  --it;
  if (p >= it->first && p < it->second.first) return it->second.second;
  return std::nullopt;
}

int64_t pool_of_ptr(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(const_cast<void*>(ptr));
  return it == g_live.end() ? -1 : pool_id_of(it->second->pool);
}

bool is_device_memory_deleter(c10::DeleterFnPtr deleter) { return deleter == &free_block_deleter; }

std::optional<SharedDeviceMemory> shared_device_memory(const void* ptr, size_t nbytes) {
  constexpr size_t kHostPage = 4096;  // mmap offsets and lengths are multiples of it
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(const_cast<void*>(ptr));
  if (it == g_live.end() || nbytes == 0 || nbytes > it->second->size) return std::nullopt;
  Block* b = it->second;
  SharedDeviceMemory out;
  out.device = b->device;
  out.fd = device_memory_file::file_descriptor(b->device);
  if (ExpandableSegment* es = b->expandable) {
    size_t first = static_cast<size_t>(b->ptr - es->base) / es->page_size;
    size_t last = static_cast<size_t>(b->ptr + nbytes - 1 - es->base) / es->page_size;
    out.offset_in_ranges = static_cast<int64_t>(b->ptr - (es->base + first * es->page_size));
    for (size_t i = first; i <= last; ++i) {
      int64_t at = es->page_file_offsets[i];
      auto size = static_cast<int64_t>(es->page_size);
      if (!out.ranges.empty() && out.ranges.back().offset + out.ranges.back().size == at) {
        out.ranges.back().size += size;
      } else {
        out.ranges.push_back({at, size});
      }
    }
    return out;
  }
  const Block* head = b;
  while (head->prev) head = head->prev;
  size_t segment_size = 0;
  for (const Block* x = head; x; x = x->next) segment_size += x->size;
  size_t begin = static_cast<size_t>(b->ptr - head->ptr) / kHostPage * kHostPage;
  size_t end = std::min(segment_size, (static_cast<size_t>(b->ptr - head->ptr) + nbytes + kHostPage - 1) / kHostPage * kHostPage);
  out.offset_in_ranges = static_cast<int64_t>(b->ptr - head->ptr) - static_cast<int64_t>(begin);
  out.ranges.push_back({g_segment_file_offsets.at(head->ptr) + static_cast<int64_t>(begin), static_cast<int64_t>(end - begin)});
  return out;
}

DeviceStats device_stats(c10::DeviceIndex device) {
  check_initialized_device(device, "memory_stats");
  std::lock_guard<std::mutex> lock(g_mutex);
  return cache_locked(device).stats;
}

int64_t memory_allocated_bytes(c10::DeviceIndex device) {
  check_initialized_device(device, "memory_allocated");
  std::lock_guard<std::mutex> lock(g_mutex);
  return cache_locked(device).stats.allocated_bytes[0].current;
}

void reset_peak_memory_stats(c10::DeviceIndex device) {
  check_initialized_device(device, "reset_peak_memory_stats");
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceStats& s = cache_locked(device).stats;
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                       &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& st : *a) st.reset_peak();
  }
  for (auto& entry : s.reserved_bytes_by_private_pools) {
    for (Stat& st : entry.second) st.reset_peak();
  }
  s.oversize_allocations.reset_peak();
  s.oversize_segments.reset_peak();
}

void reset_accumulated_memory_stats(c10::DeviceIndex device) {
  check_initialized_device(device, "reset_accumulated_memory_stats");
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceStats& s = cache_locked(device).stats;
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                       &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& st : *a) st.reset_accumulated();
  }
  s.oversize_allocations.reset_accumulated();
  s.oversize_segments.reset_accumulated();
  s.num_alloc_retries = 0;
  s.num_ooms = 0;
  s.num_sync_all_streams = 0;
  s.num_device_alloc = 0;
  s.num_device_free = 0;
  s.num_oom_rejections = 0;
}

void empty_cache() {
  auto ctx = maybe_gather(RecordContext::ALL);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_initialized) return;
  for (auto& dc : g_caches) release_cached_blocks(*dc, ctx);
}

void set_memory_capacity(c10::DeviceIndex device, int64_t nbytes) {
  check_device_index(device, "set_memory_capacity");
  TORCH_CHECK(nbytes > 0, "memory capacity must be positive, got ", nbytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceCache& dc = cache_locked(device);
  dc.capacity = static_cast<size_t>(nbytes);
  if (dc.set_fraction) dc.allowed = static_cast<size_t>(dc.fraction * static_cast<double>(dc.capacity));
}

int64_t memory_capacity(c10::DeviceIndex device) {
  check_device_index(device, "memory capacity");
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<int64_t>(cache_locked(device).capacity);
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device, "set_per_process_memory_fraction");
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceCache& dc = cache_locked(device);
  dc.fraction = fraction;
  dc.allowed = static_cast<size_t>(fraction * static_cast<double>(dc.capacity));
  dc.set_fraction = true;
}

double get_memory_fraction(c10::DeviceIndex device) {
  check_device_index(device, "get_per_process_memory_fraction");
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceCache& dc = cache_locked(device);
  return dc.set_fraction ? dc.fraction : 1.0;
}

std::pair<int64_t, int64_t> mem_get_info(c10::DeviceIndex device) {
  check_device_index(device, "mem_get_info");
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceCache& dc = cache_locked(device);
  int64_t capacity = static_cast<int64_t>(dc.capacity);
  return {std::max<int64_t>(0, capacity - static_cast<int64_t>(dc.reserved)), capacity};
}

void set_allocator_settings(const std::string& settings) {
  AllocatorConfig cfg = parse_config(settings);
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked();
  g_config = std::move(cfg);
  for (auto& dc : g_caches) dc->stats.max_split_size = static_cast<int64_t>(g_config.max_split_size);
}

AllocatorSettings allocator_settings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked();
  return {g_config.settings, g_config.max_split_size, g_config.garbage_collection_threshold,
          g_config.expandable_segments, g_config.roundup_power2_divisions};
}

void record_memory_history(bool enabled, CreateContextFn context_fn, size_t max_entries, RecordContext when,
                           bool clear_history, uint32_t skip_actions) {
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked();
  g_record_history = enabled;
  g_context_fn = enabled ? context_fn : nullptr;
  g_max_entries = std::max<size_t>(1, max_entries);
  g_record_context = static_cast<int>(enabled ? when : RecordContext::NEVER);
  g_skip_actions = skip_actions;
  if (!enabled || clear_history) {
    for (auto& dc : g_caches) {
      dc->trace.clear();
      dc->trace_next = 0;
    }
  }
}

MemorySnapshot memory_snapshot(std::optional<int64_t> pool_filter, bool include_traces) {
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked();
  MemorySnapshot snap;
  for (auto& dcp : g_caches) {
    DeviceCache& dc = *dcp;
    std::vector<const Block*> all;
    auto add_pool = [&](const BlockPool& pool) { all.insert(all.end(), pool.blocks.begin(), pool.blocks.end()); };
    add_pool(dc.large);
    add_pool(dc.small);
    for (auto& entry : dc.private_pools) {
      add_pool(entry.second->large);
      add_pool(entry.second->small);
    }
    for (auto& entry : g_live) {
      if (entry.second->device == dc.device) all.push_back(entry.second);
    }
    size_t total_active = 0;
    for (const Block* head : all) {
      // One segment per contiguous mapped range (expandable segments may have several).
      if (head->prev && head->prev->mapped) continue;
      if (pool_filter.has_value() && pool_id_of(head->pool) != *pool_filter) continue;
      c10::CachingDeviceAllocator::SegmentInfo seg;
      seg.device = dc.device;
      seg.address = reinterpret_cast<size_t>(head->ptr);
      seg.stream = reinterpret_cast<void*>(head->stream);
      seg.is_large = !head->pool->is_small;
      seg.is_expandable = head->expandable != nullptr;
      seg.owner_private_pool_id = mempool_of(head->pool);
      seg.context_when_allocated = head->context_when_segment_allocated;
      for (const Block* b = head; b != nullptr && b->mapped; b = b->next) {
        c10::CachingDeviceAllocator::BlockInfo info;
        info.size = b->size;
        info.requested_size = b->requested_size;
        info.allocated = b->allocated;
        info.active = b->allocated;
        info.context_when_allocated = b->context_when_allocated;
        seg.total_size += b->size;
        if (b->allocated) {
          seg.allocated_size += b->size;
          seg.active_size += b->size;
          seg.requested_size += b->requested_size;
        }
        seg.blocks.push_back(std::move(info));
      }
      total_active += seg.active_size;
      snap.segments.push_back(std::move(seg));
    }
    record_trace(dc, TraceEntry::SNAPSHOT, 0, total_active, 0, 0, nullptr);
    std::vector<TraceEntry> trace;
    if (include_traces) {
      // The ring buffer, oldest first.
      trace.insert(trace.end(), dc.trace.begin() + static_cast<ptrdiff_t>(dc.trace_next), dc.trace.end());
      trace.insert(trace.end(), dc.trace.begin(), dc.trace.begin() + static_cast<ptrdiff_t>(dc.trace_next));
    }
    snap.device_traces.push_back(std::move(trace));
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const auto& a, const auto& b) { return a.address < b.address; });
  return snap;
}

int64_t new_pool_id() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int64_t id = g_next_pool++;
  g_pool_use[id];
  return id;
}

void retain_pool(int64_t pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pool_use[pool].users += 1;
}

void release_pool(int64_t pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pool_use.find(pool);
  if (it == g_pool_use.end()) return;
  it->second.users -= 1;
  maybe_release_unused_pool_locked(pool);
}

int64_t pool_use_count(int64_t pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pool_use.find(pool);
  return it == g_pool_use.end() ? 0 : it->second.users;
}

int64_t exchange_thread_pool(int64_t pool) {
  int64_t previous = tls_pool;
  tls_pool = pool;
  tls_pool_device = -1;
  return previous;
}

std::pair<int64_t, int64_t> exchange_thread_pool_for_device(int64_t pool, int64_t device) {
  std::pair<int64_t, int64_t> previous{tls_pool, tls_pool_device};
  tls_pool = pool;
  tls_pool_device = static_cast<c10::DeviceIndex>(device);
  return previous;
}

PoolAllocationScope::PoolAllocationScope(int64_t pool) : previous(tls_pool) {
  previous_device = tls_pool_device;
  tls_pool = pool;
  tls_pool_device = -1;
}
PoolAllocationScope::~PoolAllocationScope() {
  tls_pool = previous;
  tls_pool_device = previous_device;
}

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

bool cpu_allocation_redirect_in_force() {
  return dynamic_cast<RedirectingCpuAllocator*>(c10::GetCPUAllocator()) != nullptr;
}

}  // namespace torch_npu
