// Random number generators of the npu devices (generator.cpp).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <optional>

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

}  // namespace torch_npu
