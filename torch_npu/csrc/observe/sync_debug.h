// Sync debug mode (sync_debug.cpp): every host synchronisation is announced here, and
// warns or raises per torch.npu.set_sync_debug_mode.
#pragma once

namespace torch_npu {

void note_host_sync(const char* what);
int sync_debug_mode();
void set_sync_debug_mode(int mode);

}  // namespace torch_npu
