// at_npu::native::npu_dropout_gen_mask: a packed dropout keep-mask drawn from an explicit
// (seed, offset), for kernels that apply dropout themselves.
#include "third_party/op-plugin/op_plugin/include/ops.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>



namespace at_npu::native {

at::Tensor npu_dropout_gen_mask(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed, int64_t offset,
                                c10::optional<bool> /*parallel*/, c10::optional<bool> /*sync*/) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "npu_dropout_gen_mask: p must be in [0, 1], got ", p);
  TORCH_CHECK(offset >= 0, "npu_dropout_gen_mask: offset must be non-negative, got ", offset);
  constexpr int64_t kAlign = 128;  // elements per mask block
  const int64_t numel = c10::multiply_integers(size);
  const int64_t padded = (numel + kAlign - 1) / kAlign * kAlign;
  // One stream of numbers per (seed, offset): the offset selects a distinct seed, the
  // way a Philox offset selects a distinct subsequence.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed) ^
                                                       (static_cast<uint64_t>(offset) * 0x9E3779B97F4A7C15ULL));
  at::Tensor keep = at::bernoulli(at::full({padded}, 1.0 - p, at::kFloat), gen).to(at::kByte);
  // Bit i of byte j is element 8 * j + i (little-endian bit order).
  at::Tensor weights = at::pow(at::full({8}, 2, at::kInt), at::arange(8, at::kInt)).to(at::kByte);
  at::Tensor packed = (keep.view({padded / 8, 8}).to(at::kInt) * weights.to(at::kInt)).sum(1).to(at::kByte);
  return packed.to(self.device());
}

}  // namespace at_npu::native
