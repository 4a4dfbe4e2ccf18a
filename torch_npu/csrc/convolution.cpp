// Convolution on npu. ATen routes convolutions of devices other than CPU/CUDA to the
// "overrideable" ops, so they are implemented here by running the CPU convolution on
// the same memory (recorded instead when a graph is capturing).
#include "npu_runtime.h"

#include <torch/library.h>

namespace torch_npu {
namespace {

using TensorFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

at::Tensor meta_of(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// Runs `fn` over CPU aliases of `inputs` and returns npu outputs; during capture, output
// shapes come from running `fn` on meta tensors and the real call is recorded.
std::vector<at::Tensor> run_on_device(const std::vector<at::Tensor>& inputs, const TensorFn& fn) {
  c10::DeviceIndex device = -1;
  for (const auto& t : inputs) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.device().type() == kNpu, "expected npu tensors, got one on ", t.device());
    if (device < 0) device = t.device().index();
    TORCH_CHECK(t.device().index() == device, "Expected all tensors to be on the same device, but found npu:",
                static_cast<int>(device), " and ", t.device());
  }
  if (device < 0) device = current_device();
  std::vector<at::Tensor> aliases;
  aliases.reserve(inputs.size());
  for (const auto& t : inputs) aliases.push_back(t.defined() ? cpu_alias(t) : t);

  if (!is_recording()) {
    std::vector<at::Tensor> results;
    {
      CpuAllocationRedirect redirect(device);
      results = fn(aliases);
    }
    std::vector<at::Tensor> outs;
    for (const auto& r : results) outs.push_back(r.defined() ? adopt_cpu_result(r, device) : r);
    return outs;
  }
  std::vector<at::Tensor> metas;
  for (const auto& t : inputs) metas.push_back(meta_of(t));
  std::vector<at::Tensor> shapes = fn(metas);
  std::vector<at::Tensor> outs, out_aliases;
  for (const auto& m : shapes) {
    if (!m.defined()) {
      outs.emplace_back();
      out_aliases.emplace_back();
      continue;
    }
    at::Tensor o = at::empty_strided(m.sizes(), m.strides(), m.options().device(kNpu, device));
    outs.push_back(o);
    out_aliases.push_back(cpu_alias(o));
  }
  // Absent tensors (no bias, a gradient the mask leaves out) have nothing to keep alive.
  std::vector<at::Tensor> keep;
  for (const auto& t : inputs) if (t.defined()) keep.push_back(t);
  for (const auto& t : outs) if (t.defined()) keep.push_back(t);
  record_host_call([fn, aliases, out_aliases]() {
    std::vector<at::Tensor> results = fn(aliases);
    for (size_t i = 0; i < results.size(); ++i) {
      if (out_aliases[i].defined()) {
        at::Tensor dst = out_aliases[i];
        dst.copy_(results[i]);
      }
    }
  }, std::move(keep));
  return outs;
}

at::Tensor npu_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  std::vector<int64_t> s(C10_AS_INTARRAYREF_SLOW(stride).vec()), p(C10_AS_INTARRAYREF_SLOW(padding).vec()),
      d(C10_AS_INTARRAYREF_SLOW(dilation).vec()), op(C10_AS_INTARRAYREF_SLOW(output_padding).vec());
  int64_t g = groups.expect_int();
  at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  return run_on_device({input, weight, b}, [=](const std::vector<at::Tensor>& t) {
    std::optional<at::Tensor> bb = t[2].defined() ? std::optional<at::Tensor>(t[2]) : std::nullopt;
    return std::vector<at::Tensor>{at::convolution(t[0], t[1], bb, s, p, d, transposed, op, g)};
  })[0];
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  std::vector<int64_t> s(C10_AS_INTARRAYREF_SLOW(stride).vec()), p(C10_AS_INTARRAYREF_SLOW(padding).vec()),
      d(C10_AS_INTARRAYREF_SLOW(dilation).vec()), op(C10_AS_INTARRAYREF_SLOW(output_padding).vec());
  int64_t g = groups.expect_int();
  std::vector<int64_t> bias_sizes{weight.size(transposed ? 1 : 0) * (transposed ? g : 1)};
  auto outs = run_on_device({grad_output, input, weight}, [=](const std::vector<at::Tensor>& t) {
    auto r = at::convolution_backward(t[0], t[1], t[2], bias_sizes, s, p, d, transposed, op, g, output_mask);
    return std::vector<at::Tensor>{std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  });
  return {outs[0], outs[1], outs[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(npu_convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(npu_convolution_backward));
}

}  // namespace torch_npu
