// at_npu::NPUGeneratorImpl as a view of the runtime's generators, and the public hooks
// interface: both answer from the generators torch.npu seeds.
#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"
#include "torch_npu/csrc/core/npu/NPUHooksInterface.h"

#include <deque>
#include <mutex>

#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/generator.h"

namespace at_npu {
namespace {

c10::DeviceIndex resolve(c10::DeviceIndex device, const char* what) {
  c10::DeviceIndex idx = device < 0 ? torch_npu::current_device() : device;
  torch_npu::check_device_index(idx, what);
  return idx;
}

}  // namespace

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device_index)
    : NPUGeneratorImpl(resolve(device_index, "NPUGeneratorImpl"),
                       torch_npu::new_generator(resolve(device_index, "NPUGeneratorImpl"))) {}

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device_index, at::Generator runtime)
    : c10::GeneratorImpl(c10::Device(torch_npu::kNpu, device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      runtime_(std::move(runtime)) {}

at::Generator NPUGeneratorImpl::of(const at::Generator& runtime) {
  TORCH_CHECK(runtime.defined() && runtime.device().type() == torch_npu::kNpu,
              "NPUGeneratorImpl::of expects an npu generator, got one of ",
              runtime.defined() ? runtime.device().str() : std::string("nothing"));
  if (auto* view = dynamic_cast<NPUGeneratorImpl*>(runtime.unsafeGetGeneratorImpl())) {
    return at::Generator(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(view));
  }
  return at::Generator(
      c10::intrusive_ptr<NPUGeneratorImpl>::unsafe_steal_from_new(new NPUGeneratorImpl(runtime.device().index(), runtime)));
}

std::shared_ptr<NPUGeneratorImpl> NPUGeneratorImpl::clone() const { return std::shared_ptr<NPUGeneratorImpl>(clone_impl()); }

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  return new NPUGeneratorImpl(device().index(), runtime_.clone());
}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) { runtime_.set_current_seed(seed); }
void NPUGeneratorImpl::set_offset(uint64_t offset) { runtime_.set_offset(offset); }
uint64_t NPUGeneratorImpl::get_offset() const { return runtime_.get_offset(); }
uint64_t NPUGeneratorImpl::current_seed() const { return runtime_.current_seed(); }
uint64_t NPUGeneratorImpl::seed() { return runtime_.seed(); }

void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  runtime_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  return runtime_.unsafeGetGeneratorImpl()->get_state();
}

void NPUGeneratorImpl::set_philox_offset_per_thread(uint64_t offset) { set_offset(offset); }
uint64_t NPUGeneratorImpl::philox_offset_per_thread() const { return get_offset(); }

PhiloxNpuState NPUGeneratorImpl::philox_npu_state(uint64_t increment) {
  const auto [seed, offset] = torch_npu::reserve_philox_values(runtime_, increment);
  return PhiloxNpuState(seed, offset);
}

std::pair<uint64_t, uint64_t> NPUGeneratorImpl::philox_engine_inputs(uint64_t increment) {
  PhiloxNpuState state = philox_npu_state(increment);
  return {state.seed_, state.offset_};
}

c10::DeviceType NPUGeneratorImpl::device_type() { return torch_npu::kNpu; }

namespace detail {

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index) {
  static std::once_flag once;
  static std::deque<at::Generator> views;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < torch_npu::device_count(); ++i) {
      views.push_back(NPUGeneratorImpl::of(torch_npu::default_generator(i)));
    }
  });
  return views[resolve(device_index, "getDefaultNPUGenerator")];
}

at::Generator createNPUGenerator(c10::DeviceIndex device_index) {
  return at::Generator(c10::make_intrusive<NPUGeneratorImpl>(device_index));
}

}  // namespace detail
}  // namespace at_npu

namespace c10_npu {

bool NPUHooksInterface::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return torch_npu::is_initialized() && device_index >= 0 && device_index < torch_npu::device_count();
}

const at::Generator& NPUHooksInterface::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return torch_npu::default_generator(device_index);
}

NPUHooksInterface& get_npu_hooks() {
  static NPUHooksInterface hooks;
  return hooks;
}

}  // namespace c10_npu
