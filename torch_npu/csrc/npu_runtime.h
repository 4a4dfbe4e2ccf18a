// Shared declarations of the simulated NPU runtime: devices, memory, streams, capture.
//
// The runtime keeps device memory in host RAM so that every ATen CPU kernel can run
// directly on an npu tensor's bytes. This header is the contract between the pieces
// (allocator, device guard, kernels, graphs) that live in separate translation units.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceCapability.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_npu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

// ---- devices -------------------------------------------------------------
c10::DeviceIndex device_count();                  // from TORCH_NPU_DEVICE_COUNT, default 2
c10::DeviceIndex current_device();                // per thread
void set_current_device(c10::DeviceIndex index);  // validates
void check_device_index(int64_t index, const char* what);
c10::DeviceIndex resolve_device_index(int64_t index);  // -1 -> current
void lazy_init();
bool is_initialized();

// ---- device model (device_model.cpp) --------------------------------------
// The card the devices pretend to be (TORCH_NPU_DEVICE_MODEL; default: the generic
// simulated NPU). A bad name raises a clear error, every time it is asked.
struct DeviceProfile {
  std::string name;
  int64_t total_memory;
  int64_t cube_core_num;
  int64_t vector_core_num;
  int64_t l2_cache_size;
  int major;
  int minor;
  bool bf16;
  std::string arch;
};
const std::vector<DeviceProfile>& device_profiles();
const DeviceProfile& device_profile();
c10::DeviceCapability device_capability(c10::DeviceIndex device);

// ---- memory (allocator.cpp) ------------------------------------------------
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

// Pinned host memory (host_allocator.cpp).
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

// ---- sync debug mode (sync_debug.cpp) ----------------------------------------
// Called at every host synchronisation: warns or raises per torch.npu.set_sync_debug_mode.
void note_host_sync(const char* what);
int sync_debug_mode();
void set_sync_debug_mode(int mode);

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

// ---- streams and events --------------------------------------------------
c10::Stream current_stream(c10::DeviceIndex device);
// Milliseconds between two recorded timing events (their event_id handles).
double event_elapsed_ms(void* start, void* end);

// ---- graph capture -------------------------------------------------------
// A capture belongs to a stream: work queued on a stream being captured (by any thread,
// e.g. autograd's device threads running a backward on its forward's stream) is recorded
// instead of run; work on other streams runs. See graph.cpp.
class GraphCapture;
// The capture of this thread's current stream on the current device (recording or
// checking), or nullptr.
std::shared_ptr<GraphCapture> active_capture();
// True when work queued now would be recorded (a capture that is not a check run).
bool is_recording();
// The graph pool allocations on `device` are drawn from now (0: the ordinary cache).
int64_t capture_pool_for_allocation(c10::DeviceIndex device);
// Called before anything that makes the host wait for the device: raises (aborting the
// capture of the waited-for stream) where the capture rules forbid it.
void check_not_capturing(const char* what);
// The same for a wait on `stream`, and on every stream of `device` (torch.npu.synchronize()).
void check_stream_sync(const c10::Stream& stream, const char* what);
void check_device_sync(c10::DeviceIndex device, const char* what);
// Events: an event recorded on a capturing stream carries the capture's id; a stream
// that waits on it joins that capture (fork/join of side streams, as on CUDA).
uint64_t capture_id_of_stream(const c10::Stream& stream);
void join_capture(uint64_t capture_id, const c10::Stream& stream);
bool is_capture_underway(uint64_t capture_id);

// Records a boxed operator call into the active capture. `stack` holds the arguments
// with npu tensors already replaced by their CPU aliases; on return it holds the
// operator's outputs (npu tensors from the graph's pool), computed without running.
// Returns false (recording nothing) when the active capture is a check run: the caller
// then runs the operator.
bool record_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu,
                     c10::DeviceIndex device);
// Records a host call into the active capture; `keep` are the npu tensors it uses.
void record_host_call(std::function<void()> fn, std::vector<at::Tensor> keep = {});

// ---- tensor aliasing ------------------------------------------------------
// A CPU tensor over the same bytes as the npu tensor `t` (no copy), over a CPU storage of
// its own: only for a tensor that is the sole npu argument of the work (cpu_aliases.cpp).
at::Tensor cpu_alias(const at::Tensor& t);
// The CPU aliases of the npu tensors of one piece of work: one CPU storage per npu
// storage and one CPU tensor per npu tensor, so that ATen's overlap checks (which compare
// storages and TensorImpls) see the aliasing the npu tensors have (cpu_aliases.cpp).
class CpuAliasSet {
 public:
  at::Tensor alias(const at::Tensor& t);
  // True when `t` has no alias in the set yet.
  bool is_new(const at::Tensor& t) const;

 private:
  std::vector<std::pair<c10::StorageImpl*, c10::Storage>> storages_;
  std::vector<std::pair<c10::TensorImpl*, at::Tensor>> tensors_;
};
// An npu tensor that takes over the memory of a CPU tensor produced on behalf of
// `device` (no copy when the memory came from the device allocator).
at::Tensor adopt_cpu_result(const at::Tensor& cpu, c10::DeviceIndex device);

// ---- random ----------------------------------------------------------------
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// The CPU generator whose state backs an npu generator.
at::Generator backing_cpu_generator(const at::Generator& npu_gen);

}  // namespace torch_npu
