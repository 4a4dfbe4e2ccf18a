// Device registry of the simulated NPU: how many devices exist, which one each thread
// uses, and the one-time initialisation that real hardware would do on first use.
//
// Like CUDA, a process forked from one that initialised npu cannot use npu: a real
// driver's state does not survive fork, and the simulator must not hide the bugs that
// real hardware exposes. The child learns it on first use, with the fix (spawn).
#include "fallback.h"
#include "env_settings.h"

#include <torch/csrc/utils/device_lazy_init.h>

#include <pthread.h>

#include <atomic>
#include <cstdlib>

namespace torch_npu {
namespace {

c10::DeviceIndex read_device_count() {
  return static_cast<c10::DeviceIndex>(env_settings::read_integer(
      "TORCH_NPU_DEVICE_COUNT", 2, 1, 64,
      "an integer between 1 and 64, the number of simulated npu devices (unset, there are 2)"));
}

thread_local c10::DeviceIndex tls_current_device = 0;
std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;
std::atomic<bool> g_in_bad_fork{false};

void mark_forked_child() { g_in_bad_fork.store(true, std::memory_order_relaxed); }

}  // namespace

bool in_bad_fork() { return g_in_bad_fork.load(std::memory_order_relaxed); }

void check_not_in_bad_fork() {
  TORCH_CHECK(!in_bad_fork(), "Cannot re-initialize npu in forked subprocess. To use npu with multiprocessing, "
              "you must use the 'spawn' start method (e.g. multiprocessing.get_context('spawn') or "
              "torch.multiprocessing.set_start_method('spawn')); this process was forked from one that "
              "had initialised npu.");
}

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
  check_not_in_bad_fork();
  if (g_initialized.load(std::memory_order_acquire)) return;
  std::call_once(g_init_once, [] {
    device_count();
    device_profile();  // a bad TORCH_NPU_DEVICE_MODEL or PYTORCH_NPU_ALLOC_CONF fails here, clearly
    init_allocator();
    // Children forked from now on are in a bad fork, for our kernels and for torch's
    // Python-level lazy initialisation (torch.npu._is_in_bad_fork, torch.manual_seed).
    pthread_atfork(nullptr, nullptr, &mark_forked_child);
    torch::utils::register_fork_handler_for_device_init(kNpu);
    g_initialized.store(true, std::memory_order_release);
  });
}

bool is_initialized() { return g_initialized.load(std::memory_order_acquire); }

}  // namespace torch_npu
