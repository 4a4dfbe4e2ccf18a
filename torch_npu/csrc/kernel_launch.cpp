// The launch scope through which every piece of npu work announces itself to the
// profiler and the stream sanitizer, and the tensor accesses it makes.
//
// A launch is described once, where the runtime knows it best (the operator fallback
// from the schema's alias annotations, copies from their source and destination, a
// graph node from what it was captured with), and each observer takes what it needs:
// the profiler the name, stream and times; the sanitizer the streams and accesses.
#include "npu_observe.h"

#include <sstream>

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

}  // namespace torch_npu::observe
