// How many 32-bit values a random operator's cpu kernel draws at most.
//
// An npu generator loads its engine with only the Philox words a call can reach
// (generator.cpp), so a small draw costs a few Philox blocks instead of a whole Twister
// state. The bounds below follow torch's cpu kernels (ATen/native/cpu/DistributionTemplates.h
// and DistributionKernels.cpp): per real element, a float or narrower sample takes one
// value and a double sample two; Box-Muller normals take two doubles per pair of samples,
// and the vectorised normal fill redraws its last 16 samples; bernoulli with a scalar
// probability seeds its MKL stream with one value. A bound that is too small is caught
// after the call (generator.cpp asserts), never silently.
#include "torch_npu/csrc/aten/random_draws.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>

namespace torch_npu {
namespace {

// The shape of an operator's bound, in values per real element of its first argument.
enum class DrawBound {
  PerSample,      // one sample per element: 1 value (2 for double)
  TwoPerElement,  // at most 2 values per element (double-precision uniforms underneath)
  Normal,         // Box-Muller: at most 2 values per element, plus the 16 redrawn samples
};

const std::unordered_map<std::string, DrawBound>& bounded_operators() {
  static const std::unordered_map<std::string, DrawBound> table{
      {"aten::uniform_", DrawBound::PerSample},
      {"aten::normal_", DrawBound::Normal},
      {"aten::random_", DrawBound::TwoPerElement},
      {"aten::exponential_", DrawBound::TwoPerElement},
      {"aten::cauchy_", DrawBound::TwoPerElement},
      {"aten::log_normal_", DrawBound::TwoPerElement},
      {"aten::geometric_", DrawBound::TwoPerElement},
      {"aten::bernoulli_", DrawBound::TwoPerElement},
  };
  return table;
}

}  // namespace

std::optional<uint64_t> max_values_drawn(const c10::OperatorHandle& op, const c10::IValue* args, size_t num_args) {
  const auto& table = bounded_operators();
  auto it = table.find(op.schema().name());
  if (it == table.end() || num_args == 0 || !args[0].isTensor()) return std::nullopt;
  const at::Tensor& self = args[0].toTensor();
  const uint64_t elements = static_cast<uint64_t>(self.numel()) * (self.is_complex() ? 2 : 1);
  const bool double_samples = self.scalar_type() == at::kDouble || self.scalar_type() == at::kComplexDouble;
  switch (it->second) {
    case DrawBound::PerSample:
      return elements * (double_samples ? 2 : 1);
    case DrawBound::TwoPerElement:
      return 2 * elements + 2;  // + the seed of an MKL stream
    case DrawBound::Normal:
      return 2 * (elements + 16);
  }
  return std::nullopt;
}

}  // namespace torch_npu
