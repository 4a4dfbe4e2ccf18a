// Device registry of the simulated NPU: how many devices exist, which one each thread
// uses, and the one-time initialisation that real hardware would do on first use.
#include "npu_runtime.h"

#include <atomic>
#include <cstdlib>

namespace torch_npu {
namespace {

c10::DeviceIndex read_device_count() {
  const char* env = std::getenv("TORCH_NPU_DEVICE_COUNT");
  if (env == nullptr || *env == '\0') return 2;
  char* end = nullptr;
  long value = std::strtol(env, &end, 10);
  TORCH_CHECK(end != env && *end == '\0' && value >= 1 && value <= 64,
              "TORCH_NPU_DEVICE_COUNT must be an integer between 1 and 64, got '", env, "'");
  return static_cast<c10::DeviceIndex>(value);
}

thread_local c10::DeviceIndex tls_current_device = 0;
std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;

}  // namespace

c10::DeviceIndex device_count() {
  static c10::DeviceIndex count = read_device_count();
  return count;
}

void check_device_index(int64_t index, const char* what) {
  TORCH_CHECK(index >= 0 && index < device_count(), "Invalid npu device index ", index,
                    " for ", what, ": there are ", static_cast<int>(device_count()),
                    " npu devices (valid indices 0..", device_count() - 1,
                    "; set TORCH_NPU_DEVICE_COUNT to simulate more)");
}

c10::DeviceIndex resolve_device_index(int64_t index) {
  if (index < 0) return current_device();
  check_device_index(index, "this call");
  return static_cast<c10::DeviceIndex>(index);
}

c10::DeviceIndex current_device() { return tls_current_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index, "set_device");
  tls_current_device = index;
}

void lazy_init() {
  if (g_initialized.load(std::memory_order_acquire)) return;
  std::call_once(g_init_once, [] {
    device_count();
    device_profile();  // a bad TORCH_NPU_DEVICE_MODEL or PYTORCH_NPU_ALLOC_CONF fails here, clearly
    init_allocator();
    g_initialized.store(true, std::memory_order_release);
  });
}

bool is_initialized() { return g_initialized.load(std::memory_order_acquire); }

}  // namespace torch_npu
