// The simulated cards' memory: one memory file (memfd) per device, from which the caching
// allocator maps its segments and the pages of its expandable segments.
//
// Host RAM from malloc cannot be seen by another process; a file's pages can. Backing the
// device memory by a file is what lets torch.multiprocessing hand an npu tensor to another
// process as CUDA IPC does: the receiver maps the same pages of the same file, so both
// see every write. Ranges given back are punched out of the file, so freed memory
// returns to the host as it did with free().
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace pybind11 {
class module_;
}

namespace torch_npu {
namespace device_memory_file {

// Maps `size` bytes (a multiple of the host page) of device `device`'s file at a new address,
// or at `address` (replacing what is mapped there) when it is not null. Returns the address,
// or nullptr when the host cannot provide it; `*file_offset` receives where the bytes live.
void* map(c10::DeviceIndex device, size_t size, void* address, int64_t* file_offset);

// Gives the range back to the file. With `keep_reservation`, the address range stays
// reserved (inaccessible), as an expandable segment's unmapped pages are.
void unmap(c10::DeviceIndex device, void* address, size_t size, int64_t file_offset, bool keep_reservation);

// The file descriptor of device `device`'s memory file (-1 before its first mapping).
int file_descriptor(c10::DeviceIndex device);

// A range of a memory file, for a process that maps it.
struct FileRange {
  int64_t offset;
  int64_t size;
};

// Maps `ranges` of the memory file `fd` (another process's, received through a socket)
// contiguously; returns the base address. Unmap with `unmap_imported(base, total size)`.
void* map_imported(int fd, const std::vector<FileRange>& ranges);
void unmap_imported(void* base, size_t size);

}  // namespace device_memory_file

// Where an allocation's bytes live in its device's memory file, for another process to map
// them; nullopt for memory the allocator did not hand out at `ptr` (allocator.cpp).
struct SharedDeviceMemory {
  c10::DeviceIndex device = 0;
  int fd = -1;
  int64_t offset_in_ranges = 0;  // where `ptr` is inside the ranges mapped one after another
  std::vector<device_memory_file::FileRange> ranges;
};
std::optional<SharedDeviceMemory> shared_device_memory(const void* ptr, size_t nbytes);

// Registers torch_npu._C._share_device_memory / _import_device_memory (tensor_sharing.cpp).
void init_tensor_sharing_bindings(pybind11::module_& m);
}  // namespace torch_npu
