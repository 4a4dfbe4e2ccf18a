// The npu's Kineto activity profiler: the device rows of torch.profiler traces.
//
// PyTorch profiles an out-of-tree device through a Kineto child profiler that the
// runtime registers (REGISTER_PRIVATEUSE1_PROFILER); torch.profiler then runs it for
// ProfilerActivity.PrivateUse1 (shown as NPU) or use_device="npu". While a session
// records, every kernel the runtime runs (operators, copies, compiled host kernels, NPU
// graph replay nodes) is stamped with its device, stream, times and the correlation id of
// the CPU op that launched it. When the session ends the stamps become Kineto
// activities: a kernel on one trace row per npu stream, linked to the launching CPU op
// (so key_averages() charges its time to that op as device time), and a short launch
// event on the host thread with the flow arrow to the kernel.
//
// The simulated device runs each kernel on the host inside its launch, so a kernel's
// device time is the time its CPU kernel took and the launch event covers what came
// before (argument conversion, checks).
// Kineto's activity metadata formats with fmt, which libtorch does not export.
#define FMT_HEADER_ONLY
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/ATen.h>
#include <chrono>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_set>

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#ifdef USE_KINETO
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <time_since_epoch.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

namespace torch_npu::observe::profiler {

namespace {

struct KernelStamp {
  WorkKind kind;
  std::string name;
  c10::DeviceIndex device;
  int64_t stream;
  int64_t launch_ns;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;  // of the CPU op that launched it; 0 if none
  int32_t thread;
};

std::mutex g_stamps_mutex;
std::vector<KernelStamp> g_stamps;

// Correlation ids pushed by the profiler around CPU ops, per thread.
thread_local std::vector<uint64_t> tls_correlation;
thread_local int32_t tls_system_thread = 0;

int32_t system_thread_id() {
#ifdef USE_KINETO
  if (tls_system_thread == 0) tls_system_thread = libkineto::systemThreadId();
#endif
  return tls_system_thread;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t current_correlation() { return tls_correlation.empty() ? 0 : tls_correlation.back(); }
int32_t current_thread() { return system_thread_id(); }

void record_kernel_of(WorkKind kind, const std::string& name, c10::DeviceIndex device, int64_t stream,
                      int64_t launch_ns, int64_t start_ns, int64_t end_ns, uint64_t correlation, int32_t thread) {
  std::lock_guard<std::mutex> lock(g_stamps_mutex);
  g_stamps.push_back(KernelStamp{kind, name, device, stream, launch_ns, start_ns, end_ns, correlation, thread});
}

void record_kernel(WorkKind kind, const std::string& name, c10::DeviceIndex device, int64_t stream,
                   int64_t launch_ns, int64_t start_ns, int64_t end_ns) {
  record_kernel_of(kind, name, device, stream, launch_ns, start_ns, end_ns, current_correlation(), current_thread());
}

namespace {

// The marker-only route (torch.autograd.profiler.profile(use_device="npu") without
// Kineto): PyTorch stamps an event at the start and end of every op and reports the
// difference as the op's npu time. Work runs inside the op, so host time stamps are the
// device time stamps.
struct NpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) *device = current_device();
    auto stamp = std::make_shared<int64_t>(now_ns());
    *event = std::shared_ptr<void>(stamp, stamp.get());
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    TORCH_CHECK(start != nullptr && end != nullptr && *start && *end, "npu profiler: elapsed() needs two events");
    // Microseconds, as PyTorch expects of its device stubs.
    return static_cast<float>(*static_cast<int64_t*>(end->get()) - *static_cast<int64_t*>(start->get())) / 1000.0f;
  }
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) op(d);
  }
  void synchronize() const override {}
};

struct RegisterNpuProfilerStubs {
  RegisterNpuProfilerStubs() {
    static NpuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_npu_profiler_stubs;

}  // namespace

#ifdef USE_KINETO
namespace {

std::string stream_label(int64_t stream) {
  c10::StreamId id = static_cast<c10::StreamId>(stream & ((int64_t{1} << 48) - 1));
  if (id == kCollectiveStreamId) return "Collectives (hccl)";
  return id == 0 ? std::string("Stream 0 (default)") : "Stream " + std::to_string(id);
}

int32_t resource_of(int64_t stream) {
  // Trace viewers group rows by (pid, tid): the device is the pid, the stream id the tid.
  return static_cast<int32_t>(stream & ((int64_t{1} << 31) - 1));
}

class NpuProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  NpuProfilerSession() : buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {}
  ~NpuProfilerSession() override {
    if (recording_) remove_watcher(kProfiler);
  }

  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_stamps_mutex);
      g_stamps.clear();
    }
    start_ns_ = now_ns();
    if (!recording_) add_watcher(kProfiler);
    recording_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (recording_) remove_watcher(kProfiler);
    recording_ = false;
    end_ns_ = now_ns();
    {
      std::lock_guard<std::mutex> lock(g_stamps_mutex);
      stamps_.swap(g_stamps);
      g_stamps.clear();
    }
    for (const KernelStamp& s : stamps_) {
      devices_.insert(s.device);
      streams_.insert(s.stream);
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, start_ns_, end_ns_);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t /*window_start*/, int64_t /*window_end*/) override {
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "npu");
    // getDeviceInfo() names the first device; the others are named here.
    for (c10::DeviceIndex d : devices_) {
      if (d != first_device()) logger.handleDeviceInfo(device_info(d), start_ns_);
    }
    const int32_t pid = libkineto::processId();
    int32_t next_id = 1;
    for (const KernelStamp& s : stamps_) {
      const int32_t id = next_id++;
      const libkineto::ITraceActivity* cpu_op =
          s.correlation != 0 ? linked_activity(static_cast<int32_t>(s.correlation)) : nullptr;

      auto kernel = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span,
          s.kind == WorkKind::Memcpy ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL,
          s.name);
      kernel->startTime = s.start_ns;
      kernel->endTime = s.end_ns;
      kernel->id = id;
      kernel->device = s.device;
      kernel->resource = resource_of(s.stream);
      kernel->threadId = s.thread;
      kernel->linked = cpu_op;
      kernel->flow.id = id;
      kernel->flow.type = libkineto::kLinkAsyncCpuGpu;
      kernel->flow.start = 0;
      kernel->addMetadata("device", static_cast<int>(s.device));
      kernel->addMetadata("stream", resource_of(s.stream));
      kernel->addMetadata("correlation", id);
      if (s.correlation != 0) kernel->addMetadata("External id", s.correlation);

      auto launch = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
          s.kind == WorkKind::Memcpy ? "npuMemcpy" : "npuLaunchKernel");
      launch->startTime = s.launch_ns;
      launch->endTime = std::max(s.launch_ns, s.start_ns);
      launch->id = id;
      launch->device = pid;
      launch->resource = s.thread;
      launch->threadId = s.thread;
      launch->linked = cpu_op;
      launch->flow.id = id;
      launch->flow.type = libkineto::kLinkAsyncCpuGpu;
      launch->flow.start = 1;
      launch->addMetadata("correlation", id);
      if (s.correlation != 0) launch->addMetadata("External id", s.correlation);

      launch->log(logger);
      kernel->log(logger);
      buffer_->activities.push_back(std::move(launch));
      buffer_->activities.push_back(std::move(kernel));
    }
    buffer_->gpuOpCount = static_cast<int>(stamps_.size());
    stamps_.clear();
  }

  // Naming a device here also tells Kineto not to label pids 0-15 as GPUs.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(device_info(first_device()));
  }
  // One trace row per npu stream used.
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (int64_t s : streams_) {
      c10::DeviceIndex d = static_cast<c10::DeviceIndex>(s >> 48);
      rows.push_back(libkineto::ResourceInfo{resource_of(s), resource_of(s), d, stream_label(s)});
    }
    return rows;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { tls_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!tls_correlation.empty()) tls_correlation.pop_back();
  }

 private:
  c10::DeviceIndex first_device() const { return devices_.empty() ? 0 : *devices_.begin(); }
  static libkineto::DeviceInfo device_info(c10::DeviceIndex d) {
    // After the host rows in trace viewers.
    return libkineto::DeviceInfo{d, libkineto::kExceedMaxPid + d, "NPU " + std::to_string(d),
                                 "npu:" + std::to_string(d)};
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::vector<KernelStamp> stamps_;
  std::set<c10::DeviceIndex> devices_;
  std::set<int64_t> streams_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  bool recording_ = false;
};

class NpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& /*activity_types*/, const libkineto::Config& /*config*/) override {
    return std::make_unique<NpuProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"npu"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                libkineto::ActivityType::GPU_MEMCPY,
                                                libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(NpuActivityProfiler);
#endif  // USE_KINETO

bool registered() {
#ifdef USE_KINETO
  return torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().hasFactory();
#else
  return false;
#endif
}

}  // namespace torch_npu::observe::profiler
