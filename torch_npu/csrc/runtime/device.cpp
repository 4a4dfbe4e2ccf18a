// Device registry of the simulated NPU: how many devices exist, which one each thread
// uses, and the one-time initialisation that real hardware would do on first use.
//
// Like CUDA, a process forked from one that initialised npu cannot use npu: a real
// driver's state does not survive fork, and the simulator must not hide the bugs that
// real hardware exposes. The child learns it on first use, with the fix (spawn).
#include "torch_npu/csrc/aten/deferred_registrations.h"
#include "torch_npu/csrc/runtime/env_settings.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/device_model.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/ATen.h>
#include <torch/csrc/utils/device_lazy_init.h>

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace torch_npu {
namespace {

c10::DeviceIndex read_card_count() {
  return static_cast<c10::DeviceIndex>(env_settings::read_integer(
      "TORCH_NPU_DEVICE_COUNT", 2, 1, 64,
      "an integer between 1 and 64, the number of simulated npu devices (unset, there are 2)"));
}

// ASCEND_RT_VISIBLE_DEVICES selects which cards the process sees, in the order given
// (device i is the i-th listed card), as the Ascend runtime does; the simulated cards are
// the TORCH_NPU_DEVICE_COUNT ones. A malformed list, an unknown or repeated card is an
// error rather than a silently smaller machine. torch_npu/_env_settings.py reads the same
// list with the same rule (visible_device_ids) for the cards' physical ids.
c10::DeviceIndex read_device_count() {
  const c10::DeviceIndex cards = read_card_count();
  std::optional<std::string> raw = env_settings::read("ASCEND_RT_VISIBLE_DEVICES");
  if (!raw) return cards;
  const std::string accepted = "a comma-separated list of distinct card ids between 0 and " +
                               std::to_string(cards - 1) + " (there are " + std::to_string(cards) +
                               " simulated cards; TORCH_NPU_DEVICE_COUNT sets how many), e.g. "
                               "ASCEND_RT_VISIBLE_DEVICES=1,0";
  std::vector<bool> seen(cards, false);
  c10::DeviceIndex visible = 0;
  size_t start = 0;
  while (true) {
    size_t comma = raw->find(',', start);
    std::string item = raw->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t first = item.find_first_not_of(' ');
    size_t last = item.find_last_not_of(' ');
    item = first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    std::optional<int64_t> card = env_settings::parse_integer(item, 0, cards - 1);
    if (!card || seen[*card]) env_settings::refuse("ASCEND_RT_VISIBLE_DEVICES", *raw, accepted);
    seen[*card] = true;
    ++visible;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return visible;
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
                    "; set TORCH_NPU_DEVICE_COUNT to simulate more, ASCEND_RT_VISIBLE_DEVICES selects among them)");
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
    // Before the first npu tensor exists: every operator's npu entries
    // (aten/deferred_registrations.h).
    register_dense_fallback();
    register_sparse_fallbacks();
    // Children forked from now on are in a bad fork, for our kernels and for torch's
    // Python-level lazy initialisation (torch.npu._is_in_bad_fork, torch.manual_seed).
    pthread_atfork(nullptr, nullptr, &mark_forked_child);
    torch::utils::register_fork_handler_for_device_init(kNpu);
    g_initialized.store(true, std::memory_order_release);
  });
}

bool is_initialized() { return g_initialized.load(std::memory_order_acquire); }

}  // namespace torch_npu
