// Random number generators of the npu devices (generator.cpp).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace torch_npu {

const at::Generator& default_generator(c10::DeviceIndex device);
bool is_default_generator(const at::Generator& gen);
at::Generator new_generator(c10::DeviceIndex device);

// Runs `draw` with the CPU generator that carries the stream of the npu generator `npu_gen`
// at its (seed, offset), then advances the offset by what `draw` took from it. The
// generator is locked meanwhile. `max_values`, when known, is the most 32-bit values the
// draw takes (random_draws.h); it makes small draws cheap and does not change their numbers.
void draw_from(const at::Generator& npu_gen, std::optional<uint64_t> max_values,
               c10::function_ref<void(const at::Generator&)> draw);
// The CPU generator `draw_from` would hand out for `npu_gen`, as it is now (not loaded with
// any stream): what a recorded call carries in place of its npu generator.
at::Generator engine_of(const at::Generator& npu_gen);
// Reserves `increment` 32-bit values of `npu_gen`'s stream for a kernel that draws them
// itself (the C++ API's philox_npu_state): returns the (seed, offset) it starts at and
// advances the offset, rounded up to 4, under the generator's lock. Allowed during a
// capture, as CUDA's philox_cuda_state is: a replay runs the kernel again, which reserves
// at the offset of that moment.
std::pair<uint64_t, uint64_t> reserve_philox_values(const at::Generator& npu_gen, uint64_t increment);

}  // namespace torch_npu
