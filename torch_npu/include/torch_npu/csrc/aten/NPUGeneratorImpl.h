// at_npu::NPUGeneratorImpl: an npu random generator as C++ extensions see it, the
// counterpart of at::CUDAGeneratorImpl.
//
// The generators handed out here (getDefaultNPUGenerator, createNPUGenerator) are views
// of the runtime's generators: seeding or setting the state through one is seeding the
// generator torch.npu.manual_seed / torch.Generator("npu") use, and the Philox offset
// is the runtime generator's offset. A torch.Generator("npu") created in Python is the
// runtime's own object, not an NPUGeneratorImpl: wrap it with NPUGeneratorImpl::of().
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {

// The (seed, offset) a Philox-based kernel draws from.
struct PhiloxNpuState {
  PhiloxNpuState() = default;
  PhiloxNpuState(uint64_t seed, uint64_t offset) : seed_(seed), offset_(offset) {}
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

struct TORCH_NPU_API NPUGeneratorImpl : public c10::GeneratorImpl {
  // A fresh generator of the device (-1: the current device).
  explicit NPUGeneratorImpl(c10::DeviceIndex device_index = -1);
  // A view of the runtime generator `runtime` (any npu generator, e.g. from Python).
  static at::Generator of(const at::Generator& runtime);
  ~NPUGeneratorImpl() override = default;

  std::shared_ptr<NPUGeneratorImpl> clone() const;
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_philox_offset_per_thread(uint64_t offset);
  uint64_t philox_offset_per_thread() const;
  // The current (seed, offset), then advances the offset by `increment` rounded up to a
  // multiple of 4 (each Philox call yields four numbers), as CUDA's generator does.
  PhiloxNpuState philox_npu_state(uint64_t increment);
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);
  static c10::DeviceType device_type();

  // The runtime generator this views.
  const at::Generator& runtime_generator() const { return runtime_; }

 private:
  NPUGeneratorImpl(c10::DeviceIndex device_index, at::Generator runtime);
  NPUGeneratorImpl* clone_impl() const override;
  at::Generator runtime_;
};

namespace detail {

// The device's default generator (-1: the current device), a view of torch.npu's.
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

}  // namespace detail
}  // namespace at_npu
