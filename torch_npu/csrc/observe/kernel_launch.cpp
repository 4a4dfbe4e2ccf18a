// The launch scope through which every piece of npu work announces itself to the
// profiler and the stream sanitizer, and the tensor accesses it makes.
//
// A launch is described once, where the runtime knows it best (the operator fallback
// from the schema's alias annotations, copies from their source and destination, a
// graph node from what it was captured with), and each observer takes what it needs:
// the profiler the name, stream and times; the sanitizer the streams and accesses.
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/stream.h"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <sstream>
#include <unordered_map>

namespace torch_npu::observe {

std::atomic<int> g_watchers{0};

namespace {
std::mutex g_watchers_mutex;
int g_watcher_counts[3] = {0, 0, 0};
int bit_index(int who) { return who == kProfiler ? 0 : who == kSanitizer ? 1 : 2; }
}  // namespace

void add_watcher(int who) {
  std::lock_guard<std::mutex> lock(g_watchers_mutex);
  if (g_watcher_counts[bit_index(who)]++ == 0) g_watchers.fetch_or(who);
}

void remove_watcher(int who) {
  std::lock_guard<std::mutex> lock(g_watchers_mutex);
  int& n = g_watcher_counts[bit_index(who)];
  if (n > 0 && --n == 0) g_watchers.fetch_and(~who);
}

std::string describe_tensor(const at::Tensor& t) {
  std::ostringstream out;
  out << c10::toString(t.scalar_type()) << t.sizes() << " on " << t.device();
  return out.str();
}

void add_access(std::vector<TensorAccess>& accesses, const at::Tensor& t, bool write, bool is_output,
                const std::string& argument) {
  if (!t.defined() || t.device().type() != kNpu || !t.has_storage()) return;
  const void* storage = t.storage().data();
  if (storage == nullptr) return;
  // One entry per storage: a kernel that reads and writes the same memory writes it.
  for (auto& a : accesses) {
    if (a.storage == storage) {
      a.write = a.write || write;
      a.is_output = a.is_output || is_output;
      if (!argument.empty() && a.argument.find(argument) == std::string::npos) {
        a.argument += a.argument.empty() ? argument : ", " + argument;
      }
      return;
    }
  }
  accesses.push_back(TensorAccess{storage, write, is_output, argument, describe_tensor(t)});
}

std::vector<TensorAccess> operator_accesses(const c10::FunctionSchema& schema, const c10::IValue* args,
                                            size_t num_args) {
  std::vector<TensorAccess> accesses;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < num_args && i < arguments.size(); ++i) {
    const c10::IValue& iv = args[i];
    const auto* alias = arguments[i].alias_info();
    const bool write = alias != nullptr && alias->isWrite();
    const std::string& name = arguments[i].name();
    if (iv.isTensor()) {
      add_access(accesses, iv.toTensor(), write, false, name);
    } else if (iv.isTensorList()) {
      for (const at::Tensor& t : iv.toTensorList()) add_access(accesses, t, write, false, name);
    } else if (iv.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        if (t.has_value()) add_access(accesses, *t, write, false, name);
      }
    }
  }
  return accesses;
}

KernelLaunch::KernelLaunch(WorkKind kind, const std::string& name) : active_(watching()), kind_(kind) {
  if (!active_) return;
  name_ = name;
  if (watching(kProfiler)) launch_ns_ = profiler::now_ns();
}

void KernelLaunch::start(const c10::Stream& stream) {
  if (!active_) return;
  device_ = stream.device_index();
  stream_ = stream_key(stream);
  if (watching(kSanitizer)) sanitized_ = sanitizer::on_kernel(name_, stream_, accesses_);
  started_ = true;
  if (watching(kProfiler)) start_ns_ = profiler::now_ns();
}

void KernelLaunch::add_output(const at::Tensor& t) {
  if (!active_) return;
  add_access(outputs_, t, /*write=*/true, /*is_output=*/true, "");
}

KernelLaunch::~KernelLaunch() {
  if (!active_ || !started_) return;
  if (watching(kProfiler) && start_ns_ != 0) {
    int64_t end = profiler::now_ns();
    profiler::record_kernel(kind_, name_, device_, stream_, launch_ns_ != 0 ? launch_ns_ : start_ns_, start_ns_,
                            end);
  }
  if (sanitized_) {
    try {
      sanitizer::on_kernel_end(sanitized_, outputs_);
    } catch (...) {
      // Recording outputs never raises on its own; a failure here must not escape a destructor.
    }
  }
}

std::function<void()> replayed_node(std::string name, c10::DeviceIndex device, std::vector<TensorAccess> accesses,
                                    std::function<void()> fn) {
  auto shared = std::make_shared<std::pair<std::string, std::vector<TensorAccess>>>(std::move(name),
                                                                                      std::move(accesses));
  return [shared, device, fn = std::move(fn)]() {
    if (!watching()) {
      fn();
      return;
    }
    KernelLaunch launch(WorkKind::Kernel, shared->first);
    launch.accesses() = shared->second;
    launch.start(current_stream(device));
    fn();
  };
}

// ---- collectives ---------------------------------------------------------------------

namespace {

struct IssuedCollective {
  std::string name;
  c10::DeviceIndex device = 0;
  int64_t issued_ns = 0;
  uint64_t correlation = 0;
  int32_t thread = 0;
  bool profiled = false;
};

std::mutex g_collectives_mutex;
std::unordered_map<const void*, IssuedCollective> g_collectives;

c10::Stream collective_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), kCollectiveStreamId);
}

}  // namespace

static c10::DeviceIndex npu_device_of(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b = {}) {
  for (const auto* list : {&a, &b}) {
    for (const auto& t : *list) {
      if (t.defined() && t.device().type() == kNpu) return t.device().index();
    }
  }
  return -1;
}

void collective_check(const std::string& name, const std::vector<at::Tensor>& reads,
                      const std::vector<at::Tensor>& writes) {
  if (!watching(kSanitizer)) return;
  const c10::DeviceIndex device = npu_device_of(writes, reads);
  if (device < 0) return;  // nothing on the npu (a barrier)
  const c10::Stream comm = collective_stream(device);
  on_stream_wait(comm, current_stream(device));
  std::vector<TensorAccess> accesses;
  for (const auto& t : reads) add_access(accesses, t, false, false, "input");
  for (const auto& t : writes) add_access(accesses, t, true, false, "output");
  auto kernel = sanitizer::on_kernel(name, stream_key(comm), accesses);  // raises on a race
  sanitizer::on_kernel_end(kernel, {});
  // The group keeps its tensors alive until the collective is done, as a record_stream would.
  for (const auto* list : {&writes, &reads}) {
    for (const auto& t : *list) on_record_stream(t, comm);
  }
}

void collective_issued(const void* work, const std::string& name, const std::vector<at::Tensor>& tensors) {
  if (!watching()) return;
  const c10::DeviceIndex device = npu_device_of(tensors);
  if (device < 0) return;
  IssuedCollective issued{name, device, profiler::now_ns(), 0, 0, watching(kProfiler)};
  if (issued.profiled) {
    issued.correlation = profiler::current_correlation();
    issued.thread = profiler::current_thread();
  }
  on_event_record(work, collective_stream(device));  // waiting for the work waits for this point
  std::lock_guard<std::mutex> lock(g_collectives_mutex);
  g_collectives[work] = std::move(issued);
}

void collective_completed(const void* work) {
  if (!watching(kProfiler)) return;
  IssuedCollective issued;
  {
    std::lock_guard<std::mutex> lock(g_collectives_mutex);
    auto it = g_collectives.find(work);
    if (it == g_collectives.end() || !it->second.profiled) return;
    issued = it->second;
    it->second.profiled = false;
  }
  profiler::record_kernel_of(WorkKind::Kernel, issued.name, issued.device, stream_key(collective_stream(issued.device)),
                             issued.issued_ns, issued.issued_ns, profiler::now_ns(), issued.correlation, issued.thread);
}

void collective_waited(const void* work) {
  if (!watching(kSanitizer)) return;
  c10::DeviceIndex device;
  {
    std::lock_guard<std::mutex> lock(g_collectives_mutex);
    auto it = g_collectives.find(work);
    if (it == g_collectives.end()) return;
    device = it->second.device;
  }
  on_event_wait(work, current_stream(device));
}

namespace {
thread_local const void* tls_completing_work = nullptr;
}  // namespace

const void* completing_collective() { return tls_completing_work; }

CollectiveCompletion::CollectiveCompletion(const void* work, const std::vector<c10::Device>& devices)
    : previous_work_(tls_completing_work) {
  if (devices.empty()) return;
  previous_device_ = current_device();
  if (previous_device_ != devices.front().index()) set_current_device(devices.front().index());
  const auto* guard = c10::impl::getDeviceGuardImpl(kNpu);
  for (const auto& d : devices) previous_streams_.push_back(guard->exchangeStream(collective_stream(d.index())));
  tls_completing_work = work;
}

CollectiveCompletion::~CollectiveCompletion() {
  tls_completing_work = previous_work_;
  const auto* guard = c10::impl::getDeviceGuardImpl(kNpu);
  for (auto it = previous_streams_.rbegin(); it != previous_streams_.rend(); ++it) guard->exchangeStream(*it);
  if (previous_device_ >= 0 && previous_device_ != current_device()) set_current_device(previous_device_);
}

void collective_destroyed(const void* work) {
  {
    std::lock_guard<std::mutex> lock(g_collectives_mutex);
    if (g_collectives.erase(work) == 0) return;
  }
  on_event_destroy(work);
}

}  // namespace torch_npu::observe
