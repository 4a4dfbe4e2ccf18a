// How many 32-bit values a random operator's cpu kernel draws at most (random_draws.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>

namespace torch_npu {

// The most 32-bit values the cpu kernel of `op` draws from its generator when called with
// `args` (CPU arguments), for the random operators whose kernels draw a number of values
// bounded by their tensor's size; nullopt for every other operator.
std::optional<uint64_t> max_values_drawn(const c10::OperatorHandle& op, const c10::IValue* args, size_t num_args);

}  // namespace torch_npu
