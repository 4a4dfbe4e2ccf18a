// PrivateUse1 hooks: what PyTorch asks of the npu backend outside operator dispatch
// (availability, generators, pinned memory, storage resizing, device of a pointer).
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/host_allocator.h"
#include "torch_npu/csrc/runtime/generator.h"

#include <ATen/ATen.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace torch_npu {
namespace {

struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  void init() const override { lazy_init(); }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return is_initialized() && device_index >= 0 && device_index < device_count();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override { return new_generator(device_index); }
  at::Device getDeviceFromPtr(void* data) const override {
    auto device = device_of_ptr(data);
    TORCH_CHECK(device.has_value(), "the pointer ", data, " is not npu memory");
    return c10::Device(kNpu, *device);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_host_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize npu storage that is not resizable");
    c10::DeviceIndex device = storage.device().index();
    c10::DataPtr fresh = allocate_device_memory(newsize, device, c10::Device(kNpu, device));
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) std::memcpy(fresh.get(), impl->data_ptr().get(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

}  // namespace

void register_hooks() {
  static NpuHooks* hooks = new NpuHooks();
  at::RegisterPrivateUse1HooksInterface(hooks);
}

}  // namespace torch_npu
