// torch.npu.set_sync_debug_mode: warn about, or refuse, operations that make the host
// wait for the device (.item(), .cpu(), copies from pageable memory, synchronize), as
// torch.cuda.set_sync_debug_mode does. The simulator runs every kernel synchronously, so
// this reports where real hardware would stall, not where the simulator waits.
#include "torch_npu/csrc/observe/sync_debug.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <atomic>

namespace torch_npu {
namespace {
std::atomic<int> g_sync_debug_mode{0};
}  // namespace

int sync_debug_mode() { return g_sync_debug_mode.load(std::memory_order_relaxed); }

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid sync debug mode ", mode, ": use 0 (default), 1 (warn) or 2 (error)");
  g_sync_debug_mode.store(mode);
}

void note_host_sync(const char* what) {
  int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (C10_LIKELY(mode == 0)) return;
  if (mode == 1) {
    TORCH_WARN("called a synchronizing NPU operation: ", what);
  } else {
    TORCH_CHECK(false, "called a synchronizing NPU operation: ", what,
                " (torch.npu.set_sync_debug_mode('error') is on; set it to 'default' or 'warn' to allow it)");
  }
}

}  // namespace torch_npu
