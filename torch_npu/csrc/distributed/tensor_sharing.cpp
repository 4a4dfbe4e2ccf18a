// The C++ half of sharing npu tensors between processes (torch_npu/npu/_tensor_sharing.py).
//
// The sender names the pages of its device memory file that hold a storage, plus a counter
// the receiver decrements when it lets go of them (CUDA's IPC reference counter): until
// then the sender keeps the storage, so its memory is neither reused nor given back.
// The receiver maps those pages of the sender's file: the same bytes, in both processes.
#include "torch_npu/csrc/runtime/device_memory_file.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/extension.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace torch_npu {
namespace {

namespace py = pybind11;
using device_memory_file::FileRange;

// This process's counters of storages it sent: one memory file of int64 slots.
constexpr int64_t kCounterSlots = 1 << 16;
std::mutex& g_counter_mutex = *new std::mutex;
int g_counter_fd = -1;
std::atomic<int64_t>* g_counters = nullptr;
std::vector<int64_t>& g_free_slots = *new std::vector<int64_t>;
int64_t g_next_slot = 0;

void ensure_counters_locked() {
  if (g_counters != nullptr) return;
  int fd = memfd_create("torch_npu_shared_tensor_counters", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0 && ftruncate(fd, kCounterSlots * 8) == 0, "could not create the counters of shared npu tensors");
  void* p = mmap(nullptr, kCounterSlots * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  TORCH_CHECK(p != MAP_FAILED, "could not map the counters of shared npu tensors");
  g_counter_fd = fd;
  g_counters = static_cast<std::atomic<int64_t>*>(p);
}

// A slot set to 1: the reference the message carries to its receiver.
int64_t take_counter_slot() {
  std::lock_guard<std::mutex> lock(g_counter_mutex);
  ensure_counters_locked();
  int64_t slot;
  if (!g_free_slots.empty()) {
    slot = g_free_slots.back();
    g_free_slots.pop_back();
  } else {
    TORCH_CHECK(g_next_slot < kCounterSlots, "more than ", kCounterSlots,
                " npu tensors were sent to other processes and are still held there; let some go first");
    slot = g_next_slot++;
  }
  g_counters[slot].store(1);
  return slot;
}

// The receiver's view of what it mapped.
struct ImportedMemory {
  void* base;
  size_t size;
  void* counter_page;
  std::atomic<int64_t>* counter;
};

void release_imported(void* ctx) {
  auto* imported = static_cast<ImportedMemory*>(ctx);
  device_memory_file::unmap_imported(imported->base, imported->size);
  imported->counter->fetch_sub(1);
  munmap(imported->counter_page, 4096);
  delete imported;
}

py::object share_device_memory(int64_t ptr, int64_t nbytes) {
  auto shared = shared_device_memory(reinterpret_cast<const void*>(ptr), static_cast<size_t>(nbytes));
  if (!shared) return py::none();
  int64_t slot = take_counter_slot();
  py::list ranges;
  for (const FileRange& r : shared->ranges) ranges.append(py::make_tuple(r.offset, r.size));
  return py::make_tuple(static_cast<int64_t>(shared->device), shared->fd, shared->offset_in_ranges, ranges,
                        g_counter_fd, slot);
}

// An npu tensor of `nbytes` uint8 over the sender's pages, on device `device` here.
at::Tensor import_device_memory(int fd, int64_t device, int64_t offset_in_ranges,
                                const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t nbytes,
                                int counter_fd, int64_t slot) {
  check_device_index(device, "a shared npu tensor");
  lazy_init();
  TORCH_CHECK(slot >= 0 && slot < kCounterSlots, "bad counter slot of a shared npu tensor: ", slot);
  std::vector<FileRange> file_ranges;
  size_t total = 0;
  for (const auto& r : ranges) {
    file_ranges.push_back({r.first, r.second});
    total += static_cast<size_t>(r.second);
  }
  TORCH_CHECK(offset_in_ranges >= 0 && static_cast<size_t>(offset_in_ranges + nbytes) <= total,
              "a shared npu tensor's bytes lie outside the ranges it names");
  int64_t counter_page_offset = slot * 8 / 4096 * 4096;
  void* counter_page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, counter_fd, counter_page_offset);
  TORCH_CHECK(counter_page != MAP_FAILED, "could not map the sender's counter of a shared npu tensor");
  void* base = nullptr;
  try {
    base = device_memory_file::map_imported(fd, file_ranges);
  } catch (...) {
    munmap(counter_page, 4096);
    throw;
  }
  auto* imported = new ImportedMemory{base, total, counter_page,
                                      reinterpret_cast<std::atomic<int64_t>*>(static_cast<char*>(counter_page) +
                                                                              (slot * 8 - counter_page_offset))};
  auto index = static_cast<c10::DeviceIndex>(device);
  c10::DataPtr data(static_cast<char*>(base) + offset_in_ranges, imported, &release_imported,
                    c10::Device(kNpu, index));
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes), std::move(data),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    caffe2::TypeMeta::Make<uint8_t>());
  t.unsafeGetTensorImpl()->set_sizes_contiguous({nbytes});
  return t;
}

// The receiver's hold count of a storage this process sent (0: the sender may let it go).
int64_t sent_counter(int64_t slot) {
  std::lock_guard<std::mutex> lock(g_counter_mutex);
  TORCH_CHECK(g_counters != nullptr && slot >= 0 && slot < g_next_slot, "no such counter slot: ", slot);
  return g_counters[slot].load();
}

void release_counter_slot(int64_t slot) {
  std::lock_guard<std::mutex> lock(g_counter_mutex);
  if (g_counters != nullptr && slot >= 0 && slot < g_next_slot) g_free_slots.push_back(slot);
}

}  // namespace

void init_tensor_sharing_bindings(py::module_& m) {
  m.def("_share_device_memory", &share_device_memory, py::arg("ptr"), py::arg("nbytes"));
  m.def("_import_device_memory", &import_device_memory);
  m.def("_sent_counter", &sent_counter);
  m.def("_release_counter_slot", &release_counter_slot);
}

}  // namespace torch_npu
