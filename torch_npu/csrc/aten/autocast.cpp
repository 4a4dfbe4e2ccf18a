// Autocast for npu: the same op policies as CUDA (matmul-like ops in fp16/bf16,
// numerically sensitive ops in fp32, mixed inputs promoted, and CUDA's banned list),
// registered for AutocastPrivateUse1 so torch.autocast("npu") behaves like
// torch.autocast("cuda").
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

using at::Tensor;
using at::Scalar;
using at::ScalarType;
using std::optional;
using at::IntArrayRef;
using namespace at::autocast;

#define NPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// CUDA refuses these under autocast: their reduced-precision results are unsafe and a
// safe equivalent exists. ATen keeps its own refusing kernel private, so the text is
// repeated here, word for word.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

// Ops without an autocast policy run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NPU_LOWER_PRECISION_FP)
  AT_FORALL_FP32(NPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NPU_PROMOTE)
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
}  // namespace torch_npu
