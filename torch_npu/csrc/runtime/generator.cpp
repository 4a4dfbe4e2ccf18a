// Random number generators of the simulated NPU.
//
// An npu generator owns a replaceable state holding a CPU generator: CPU kernels draw
// from that CPU generator, so seeding npu:0 reproduces npu:0's numbers, independent of
// torch.manual_seed on the CPU alone. Keeping the state behind a pointer is what makes
// graph-safe state swapping (graphsafe_get_state / graphsafe_set_state) possible.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/generator.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <deque>

namespace torch_npu {
namespace {

struct NpuGeneratorState : c10::intrusive_ptr_target {
  explicit NpuGeneratorState(uint64_t seed) : cpu(at::make_generator<at::CPUGeneratorImpl>(seed)) {}
  explicit NpuGeneratorState(at::Generator g) : cpu(std::move(g)) {}
  at::Generator cpu;
};

struct NpuGeneratorImpl final : public c10::GeneratorImpl {
  NpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
      : c10::GeneratorImpl(c10::Device(kNpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        state_(c10::make_intrusive<NpuGeneratorState>(seed)) {}
  NpuGeneratorImpl(c10::DeviceIndex device, c10::intrusive_ptr<NpuGeneratorState> state)
      : c10::GeneratorImpl(c10::Device(kNpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        state_(std::move(state)) {}

  void set_current_seed(uint64_t seed) override { state_->cpu.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { state_->cpu.set_offset(offset); }
  uint64_t get_offset() const override { return state_->cpu.get_offset(); }
  uint64_t current_seed() const override { return state_->cpu.current_seed(); }
  uint64_t seed() override { return state_->cpu.seed(); }
  void set_state(const c10::TensorImpl& new_state) override {
    state_->cpu.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return state_->cpu.unsafeGetGeneratorImpl()->get_state();
  }
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& new_state) override {
    auto* other = dynamic_cast<NpuGeneratorImpl*>(new_state.get());
    TORCH_CHECK(other != nullptr, "graphsafe_set_state expects the state of an npu generator");
    state_ = other->state_;
  }
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override {
    return c10::make_intrusive<NpuGeneratorImpl>(device().index(), state_);
  }

  at::Generator cpu_generator() const { return state_->cpu; }

 private:
  NpuGeneratorImpl* clone_impl() const override {
    auto state = c10::make_intrusive<NpuGeneratorState>(state_->cpu.clone());
    return new NpuGeneratorImpl(device().index(), std::move(state));
  }

  c10::intrusive_ptr<NpuGeneratorState> state_;
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::deque<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.emplace_back(at::make_generator<NpuGeneratorImpl>(i, c10::default_rng_seed_val));
    }
  });
  c10::DeviceIndex idx = device < 0 ? current_device() : device;
  check_device_index(idx, "the default generator");
  return generators[idx];
}

at::Generator new_generator(c10::DeviceIndex device) {
  c10::DeviceIndex idx = device < 0 ? current_device() : device;
  check_device_index(idx, "torch.Generator");
  return at::make_generator<NpuGeneratorImpl>(idx, c10::default_rng_seed_val);
}

at::Generator backing_cpu_generator(const at::Generator& npu_gen) {
  auto* impl = dynamic_cast<NpuGeneratorImpl*>(npu_gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "expected an npu generator, got a generator of ", npu_gen.device());
  return impl->cpu_generator();
}

}  // namespace torch_npu
