// Dropout on npu. The CPU kernel of native_dropout draws from the CPU default generator
// internally, which would make npu dropout ignore torch.npu.manual_seed; composing it
// from npu ops routes the draw through the npu generator (and through graph capture).

#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

std::tuple<at::Tensor, at::Tensor> npu_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0 || (train.has_value() && !*train) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) {
    return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool)).bernoulli_(1 - p);
  at::Tensor output = input.mul(mask).mul_(1.0 / (1.0 - p));
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(npu_native_dropout));
}

}  // namespace torch_npu
