// The memory files of torch_npu/csrc/runtime/device_memory_file.h: first fit over freed ranges,
// growing the (sparse) file when none fits.
#include "torch_npu/csrc/runtime/device_memory_file.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace torch_npu {
namespace device_memory_file {
namespace {

struct MemoryFile {
  int fd = -1;
  int64_t end = 0;                      // the file's size
  std::map<int64_t, int64_t> free_ranges;  // offset -> size, coalesced
};

// Never destroyed: threads that outlive static destruction still free npu memory.
std::mutex& g_mutex = *new std::mutex;
std::map<c10::DeviceIndex, MemoryFile>& g_files = *new std::map<c10::DeviceIndex, MemoryFile>;

// A forked child shares its parent's memory files (MAP_SHARED mappings and the descriptors):
// what it frees is still the parent's memory, so it never punches or reuses a range, and it
// cannot map new device memory (a forked child cannot use npu, as with CUDA).
bool g_in_forked_child = false;

void mark_forked_child() { g_in_forked_child = true; }

MemoryFile* file_locked(c10::DeviceIndex device) {
  static bool fork_handler_installed = [] { return pthread_atfork(nullptr, nullptr, &mark_forked_child) == 0; }();
  (void)fork_handler_installed;
  if (g_in_forked_child) return nullptr;
  MemoryFile& f = g_files[device];
  if (f.fd < 0) {
    std::string name = "torch_npu_device_" + std::to_string(device);
    f.fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (f.fd < 0) return nullptr;
  }
  return &f;
}

int64_t take_range_locked(MemoryFile& f, int64_t size) {
  for (auto it = f.free_ranges.begin(); it != f.free_ranges.end(); ++it) {
    if (it->second < size) continue;
    int64_t offset = it->first;
    int64_t rest = it->second - size;
    f.free_ranges.erase(it);
    if (rest > 0) f.free_ranges.emplace(offset + size, rest);
    return offset;
  }
  if (ftruncate(f.fd, f.end + size) != 0) return -1;
  int64_t offset = f.end;
  f.end += size;
  return offset;
}

void give_back_locked(MemoryFile& f, int64_t offset, int64_t size) {
  if (g_in_forked_child) return;
  fallocate(f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, size);
  auto next = f.free_ranges.lower_bound(offset);
  if (next != f.free_ranges.end() && next->first == offset + size) {
    size += next->second;
    next = f.free_ranges.erase(next);
  }
  if (next != f.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  f.free_ranges.emplace(offset, size);
}

}  // namespace

void* map(c10::DeviceIndex device, size_t size, void* address, int64_t* file_offset) {
  std::lock_guard<std::mutex> lock(g_mutex);
  MemoryFile* f = file_locked(device);
  if (f == nullptr) return nullptr;
  int64_t offset = take_range_locked(*f, static_cast<int64_t>(size));
  if (offset < 0) return nullptr;
  int flags = MAP_SHARED | (address != nullptr ? MAP_FIXED : 0);
  void* p = mmap(address, size, PROT_READ | PROT_WRITE, flags, f->fd, offset);
  if (p == MAP_FAILED) {
    give_back_locked(*f, offset, static_cast<int64_t>(size));
    return nullptr;
  }
  *file_offset = offset;
  return p;
}

void unmap(c10::DeviceIndex device, void* address, size_t size, int64_t file_offset, bool keep_reservation) {
  if (keep_reservation) {
    mmap(address, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  } else {
    munmap(address, size);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  give_back_locked(g_files[device], file_offset, static_cast<int64_t>(size));
}

int file_descriptor(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_files.find(device);
  return it == g_files.end() ? -1 : it->second.fd;
}

void* map_imported(int fd, const std::vector<FileRange>& ranges) {
  size_t total = 0;
  for (const FileRange& r : ranges) total += static_cast<size_t>(r.size);
  TORCH_CHECK(total > 0, "no memory to map");
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TORCH_CHECK(base != MAP_FAILED, "could not reserve ", total, " bytes of address space for a shared npu tensor");
  char* at = static_cast<char*>(base);
  for (const FileRange& r : ranges) {
    void* p = mmap(at, static_cast<size_t>(r.size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, r.offset);
    if (p == MAP_FAILED) {
      munmap(base, total);
      TORCH_CHECK(false, "could not map the memory of a shared npu tensor (", r.size, " bytes at offset ",
                  r.offset, " of the sender's device memory file)");
    }
    at += r.size;
  }
  return base;
}

void unmap_imported(void* base, size_t size) { munmap(base, size); }

}  // namespace device_memory_file
}  // namespace torch_npu
