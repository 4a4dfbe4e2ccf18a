// What the runtime tells its observers: the profiler (npu rows of torch.profiler traces)
// and the stream sanitizer (cross-stream races).
//
// Every piece of work the runtime runs on a stream — an operator, a copy, a compiled
// host kernel, a node of an NPU graph replay, a collective — is announced through a
// KernelLaunch, and every allocation, free, event and synchronisation through the hooks
// below. Both observers are off by default; then each hook costs one relaxed atomic
// load, so the runtime pays nothing measurable for them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch {
struct CapturedTraceback;
}

namespace torch_npu::observe {

constexpr int kProfiler = 1;
constexpr int kSanitizer = 2;
constexpr int kMemoryProfiler = 4;

extern std::atomic<int> g_watchers;
inline bool watching(int who = kProfiler | kSanitizer) {
  return (g_watchers.load(std::memory_order_relaxed) & who) != 0;
}
void add_watcher(int who);
void remove_watcher(int who);

// The stream identity observers use: device and stream id in one integer.
inline int64_t stream_key(c10::DeviceIndex device, c10::StreamId id) {
  return (static_cast<int64_t>(device) << 48) | (static_cast<int64_t>(id) & ((int64_t{1} << 48) - 1));
}
inline int64_t stream_key(const c10::Stream& s) { return stream_key(s.device_index(), s.id()); }

enum class WorkKind { Kernel, Memcpy };
struct SanitizedKernel;  // the sanitizer's record of one kernel (sanitizer.cpp)

// One tensor a kernel reads or writes, as the sanitizer sees it.
struct TensorAccess {
  const void* storage;  // data pointer of the storage (the allocator's block)
  bool write;
  bool is_output;
  std::string argument;  // schema argument name ("" for outputs)
  std::string description;  // shape, dtype, device (for reports)
};

// Describes one tensor for a report ("float32[4, 8] on npu:0").
std::string describe_tensor(const at::Tensor& t);
// Adds `t` (if it is an npu tensor) to `accesses`.
void add_access(std::vector<TensorAccess>& accesses, const at::Tensor& t, bool write, bool is_output,
                const std::string& argument);

// The accesses of an operator call, from its schema's alias annotations: arguments
// marked as written (`Tensor(a!)`) are writes, other tensor arguments reads.
std::vector<TensorAccess> operator_accesses(const c10::FunctionSchema& schema, const c10::IValue* args,
                                            size_t num_args);

// Scope of one piece of work on the current stream of `device`.
//
// Construct it where the launch starts, call start() right before the work runs (the
// sanitizer checks the accesses there and raises on a race, before anything ran), and
// let it go out of scope when the work has finished. Cheap no-op when nobody watches.
class KernelLaunch {
 public:
  KernelLaunch(WorkKind kind, const std::string& name);
  ~KernelLaunch();
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

  bool active() const { return active_; }
  std::vector<TensorAccess>& accesses() { return accesses_; }
  // Runs on `stream`; checks the accesses (sanitizer) and stamps the kernel start (profiler).
  void start(const c10::Stream& stream);
  // Outputs produced by the work (fresh memory written by it).
  void add_output(const at::Tensor& t);

 private:
  bool active_;
  bool started_ = false;
  WorkKind kind_;
  std::string name_;
  int64_t launch_ns_ = 0;
  int64_t start_ns_ = 0;
  int64_t stream_ = 0;
  c10::DeviceIndex device_ = 0;
  std::vector<TensorAccess> accesses_;
  std::vector<TensorAccess> outputs_;
  std::shared_ptr<SanitizedKernel> sanitized_;
};

// A recorded NPU graph node that announces itself each time it is replayed, with the
// accesses it had when it was captured.
std::function<void()> replayed_node(std::string name, c10::DeviceIndex device, std::vector<TensorAccess> accesses,
                                    std::function<void()> fn);

// ---- collectives ------------------------------------------------------------------
// A process group's collectives run on a communication stream of their device, as NCCL's
// do: issuing one orders that stream after the current stream (and checks the tensors it
// touches there, raising on a race before anything is sent); waiting for its work orders
// the waiting stream after the collective. The profiler shows it on that stream's row,
// from issue to completion. `work` identifies the collective until collective_destroyed.
constexpr c10::StreamId kCollectiveStreamId = 0x7fff0000;
// Before the collective is posted to its peers: raises on a race, so no peer waits for it.
void collective_check(const std::string& name, const std::vector<at::Tensor>& reads,
                      const std::vector<at::Tensor>& writes);
// Once it is issued as `work`.
void collective_issued(const void* work, const std::string& name, const std::vector<at::Tensor>& tensors);
void collective_completed(const void* work);
void collective_waited(const void* work);
void collective_destroyed(const void* work);

// The scope in which a collective's work completes its Future. The current stream of
// each of `devices` is its collective stream meanwhile, so the events the Future records
// there order whoever waits for it (Future::wait(), then() callbacks, DDP's reducer and
// comm hooks) after the collective, as NCCL's stream-aware futures do; for the
// sanitizer such an event stands for the point where `work` was issued on that stream,
// not for later collectives issued there since.
class CollectiveCompletion {
 public:
  CollectiveCompletion(const void* work, const std::vector<c10::Device>& devices);
  ~CollectiveCompletion();
  CollectiveCompletion(const CollectiveCompletion&) = delete;
  CollectiveCompletion& operator=(const CollectiveCompletion&) = delete;

 private:
  std::vector<c10::Stream> previous_streams_;
  c10::DeviceIndex previous_device_ = -1;
  const void* previous_work_;
};
// The work whose Future completes on this thread (see CollectiveCompletion), or null.
const void* completing_collective();

// ---- allocator (the allocator reports to the memory profiler itself) ---------------
void on_block_allocated(void* ptr, size_t size, c10::DeviceIndex device);
// `pool` is the block's memory pool (0: the general cache, else an NPU graph's).
void on_block_freed(void* ptr, int64_t pool);

// ---- streams and events (sanitizer) -----------------------------------------
void on_record_stream(const at::Tensor& t, const c10::Stream& stream);
void on_event_record(const void* event, const c10::Stream& stream);
void on_event_wait(const void* event, const c10::Stream& stream);
void on_event_synchronize(const void* event);
void on_event_destroy(const void* event);
void on_stream_synchronize(const c10::Stream& stream);
// `waiter` is ordered after the work queued on `waited` so far (a copy between devices
// orders the two devices' streams around itself, as on hardware).
void on_stream_wait(const c10::Stream& waiter, const c10::Stream& waited);
void on_device_synchronize(c10::DeviceIndex device);

// ---- profiler internals shared with the launch scope ----------------------------
namespace profiler {
// Whether the npu activity profiler is in PyTorch's PrivateUse1 profiler registry.
bool registered();
int64_t now_ns();
// Records a finished kernel (called only while a profiling session records).
void record_kernel(WorkKind kind, const std::string& name, c10::DeviceIndex device, int64_t stream,
                   int64_t launch_ns, int64_t start_ns, int64_t end_ns);
// The same for work that finishes on another thread: `correlation` and `thread` are those
// of the launching CPU op (current_correlation() there).
void record_kernel_of(WorkKind kind, const std::string& name, c10::DeviceIndex device, int64_t stream,
                      int64_t launch_ns, int64_t start_ns, int64_t end_ns, uint64_t correlation, int32_t thread);
uint64_t current_correlation();
int32_t current_thread();
}  // namespace profiler

// ---- sanitizer internals shared with the launch scope ----------------------------
namespace sanitizer {
bool enabled();
// Checks and records the accesses of a kernel on `stream`; raises on a race (and on a
// race found earlier that could not raise where it was found, e.g. in a free).
std::shared_ptr<SanitizedKernel> on_kernel(const std::string& name, int64_t stream,
                                           const std::vector<TensorAccess>& accesses);
// Records the outputs the kernel wrote into fresh memory.
void on_kernel_end(const std::shared_ptr<SanitizedKernel>& kernel, const std::vector<TensorAccess>& outputs);
}  // namespace sanitizer

}  // namespace torch_npu::observe
