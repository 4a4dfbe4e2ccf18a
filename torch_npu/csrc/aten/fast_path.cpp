// What every unboxed fast path shares (fast_path.h): when one may run, how its arguments
// become CPU aliases and its results npu tensors, and the per-operator call counts.
#include "torch_npu/csrc/aten/fast_path.h"

#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/observe/npu_observe.h"

#include <algorithm>
#include <mutex>

namespace torch_npu {

namespace {

std::mutex& counters_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<FastPathCounter*>& counters() {
  static std::vector<FastPathCounter*> all;
  return all;
}

}  // namespace

FastPathCounter::FastPathCounter(std::string name) : name_(std::move(name)) {
  std::lock_guard<std::mutex> lock(counters_mutex());
  counters().push_back(this);
}

std::vector<std::pair<std::string, int64_t>> fast_path_counts() {
  std::lock_guard<std::mutex> lock(counters_mutex());
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(counters().size());
  for (const FastPathCounter* c : counters()) out.emplace_back(c->name_, c->count_.load(std::memory_order_relaxed));
  return out;
}

bool is_plain_npu(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNpu && t.layout() == at::kStrided && !t._is_zerotensor() &&
         t.scalar_type() != at::kComplexHalf;
}

bool fast_paths_allowed() { return !observe::watching() && !C10_UNLIKELY(in_bad_fork()); }

const c10::OperatorHandle& aten_op(const char* name, const char* overload) {
  return *new c10::OperatorHandle(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload));
}

bool FastCall::capture_underway() { return active_capture() != nullptr; }

at::Tensor FastCall::cpu(const at::Tensor& t) {
  if (!t.defined()) return t;
  const bool first_use = aliases_.is_new(t);
  at::Tensor alias = aliases_.alias(t);
  if (first_use) npu_to_cpu_.emplace_back(t, alias);
  return alias;
}

at::Tensor FastCall::npu(const at::Tensor& cpu_result) {
  if (!cpu_result.defined()) return cpu_result;
  for (const auto& [npu_arg, alias] : npu_to_cpu_) {
    if (alias.unsafeGetTensorImpl() == cpu_result.unsafeGetTensorImpl()) return npu_arg;
  }
  c10::StorageImpl* storage = cpu_result.storage().unsafeGetStorageImpl();
  for (const auto& [npu_arg, alias] : npu_to_cpu_) {
    if (alias.storage().unsafeGetStorageImpl() == storage) return npu_tensor_over(npu_arg.storage(), cpu_result);
  }
  for (const auto& [cpu_storage, npu_storage] : adopted_) {
    if (cpu_storage == storage) return npu_tensor_over(npu_storage, cpu_result);
  }
  at::Tensor result = adopt_cpu_result(cpu_result, device_);
  adopted_.emplace_back(storage, result.storage());
  return result;
}

void FastCall::written(const at::Tensor& arg, const at::Tensor& cpu_arg) {
  propagate_resize(arg, cpu_arg, device_, updated_);
}

}  // namespace torch_npu
