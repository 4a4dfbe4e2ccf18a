// Convolution on npu. ATen routes convolutions of devices other than CPU/CUDA to the
// "overrideable" ops, so they are implemented here by running the CPU convolution on
// the same memory (recorded instead when a graph is capturing).
//
// The outputs' memory format is the one FakeTensor predicts for npu, not the one the CPU
// kernel happens to pick: compiled graphs are planned (and their strides asserted) from
// the fake rule. That rule (torch/_subclasses/fake_impls.py, `conv`) asks ATen which
// backend serves the device (npu: Overrideable) and which memory format that backend
// produces; the CPU kernel answers for Mkldnn instead, e.g. channels-last outputs for a
// channels-last input where the npu rule says contiguous.
//
// `npu::_convolution_host_layout` is the same convolution with the CPU kernel's memory
// format, unconverted: what FakeTensor predicts for a cpu convolution of the same
// geometry. Inductor's npu post-grad pass calls it in place of `aten.convolution`, with a
// fake kernel giving those strides, so compiled npu graphs plan cpu's layout and pass the
// bias to the kernel as compiled cpu graphs do.
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/convolution.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/native/ConvUtils.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

using TensorFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

at::Tensor meta_of(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// What the profiler and the stream sanitizer see of a call: `name` reading `inputs`.
std::vector<observe::TensorAccess> input_accesses(const std::vector<at::Tensor>& inputs,
                                                  const std::vector<std::string>& names) {
  std::vector<observe::TensorAccess> accesses;
  for (size_t i = 0; i < inputs.size(); ++i) observe::add_access(accesses, inputs[i], false, false, names[i]);
  return accesses;
}

// Runs `fn` over CPU aliases of `inputs` and returns npu outputs; during capture, output
// shapes come from running `fn` on meta tensors and the real call is recorded. The call
// is npu work named `name` (the profiler's kernel, the sanitizer's reads and writes).
std::vector<at::Tensor> run_on_device(const char* name, const std::vector<at::Tensor>& inputs,
                                      const std::vector<std::string>& input_names, const TensorFn& fn) {
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
    observe::KernelLaunch launch(observe::WorkKind::Kernel, name);
    if (launch.active()) {
      if (observe::watching(observe::kSanitizer)) launch.accesses() = input_accesses(inputs, input_names);
      launch.start(current_stream(device));
    }
    std::vector<at::Tensor> results;
    {
      CpuAllocationRedirect redirect(device);
      results = fn(aliases);
    }
    std::vector<at::Tensor> outs;
    for (const auto& r : results) outs.push_back(r.defined() ? adopt_cpu_result(r, device) : r);
    for (const auto& o : outs) launch.add_output(o);
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
  std::vector<observe::TensorAccess> accesses = input_accesses(inputs, input_names);
  for (const auto& o : outs) observe::add_access(accesses, o, true, false, "");
  record_host_call(observe::replayed_node(name, device, std::move(accesses), [fn, aliases, out_aliases]() {
    std::vector<at::Tensor> results = fn(aliases);
    for (size_t i = 0; i < results.size(); ++i) {
      if (out_aliases[i].defined()) {
        at::Tensor dst = out_aliases[i];
        dst.copy_(results[i]);
      }
    }
  }), std::move(keep));
  return outs;
}

// The memory format the fake rule gives the convolution's outputs, asked of ATen's backend
// rule for these npu tensors exactly as that rule asks it.
at::MemoryFormat fake_rule_memory_format(const at::Tensor& input, const at::Tensor& weight,
                                         const std::optional<at::Tensor>& bias, at::OptionalSymIntArrayRef bias_sizes,
                                         c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                         c10::SymIntArrayRef dilation, bool transposed,
                                         c10::SymIntArrayRef output_padding, const c10::SymInt& groups) {
  at::native::ConvBackend backend = at::native::select_conv_backend(
      input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, bias_sizes);
  at::Tensor in = meta_of(input);
  at::Tensor w = meta_of(weight);
  if (weight.dim() == 3) {
    // The rule expands 1-d convolutions to 2-d before asking.
    in = in.contiguous().unsqueeze(2);
    w = w.unsqueeze(2);
  }
  return at::native::_determine_backend_memory_format(in, w, backend);
}

// `t` in memory format `fmt`, as the fake rule converts its outputs.
at::Tensor in_memory_format(const at::Tensor& t, at::MemoryFormat fmt) {
  if (!t.defined() || t.is_contiguous(fmt)) return t;
  if (t.dim() == 3 && fmt == at::MemoryFormat::ChannelsLast) {
    return t.unsqueeze(2).contiguous(fmt).squeeze(2);
  }
  return t.contiguous(fmt);
}

// A cpu tensor of `t`'s dtype with these sizes and strides over a storage of the right size
// and no memory: ATen's backend rules read only metadata (and take views), so the probe
// costs no allocation of the input's size.
at::Tensor cpu_layout_probe(const at::Tensor& t, at::IntArrayRef sizes, at::IntArrayRef strides) {
  size_t nbytes = at::detail::computeStorageNbytes(sizes, strides, t.dtype().itemsize());
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(nullptr, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor probe = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                              t.dtype());
  probe.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return probe;
}

at::Tensor cpu_layout_probe(const at::Tensor& t) {
  return t.defined() ? cpu_layout_probe(t, t.sizes(), t.strides()) : t;
}

// The memory format the CPU kernel gives this convolution's output, asked of ATen's backend
// rule for cpu tensors of this geometry as FakeTensor's rule asks it for a cpu convolution.
at::MemoryFormat cpu_kernel_memory_format(const at::Tensor& input, const at::Tensor& weight,
                                          const at::Tensor& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                                          at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                                          int64_t groups) {
  at::Tensor in = cpu_layout_probe(input), w = cpu_layout_probe(weight), b = cpu_layout_probe(bias);
  std::optional<at::Tensor> bb = b.defined() ? std::optional<at::Tensor>(b) : std::nullopt;
  at::native::ConvBackend backend = at::native::select_conv_backend(
      in, w, bb, c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
      c10::fromIntArrayRefSlow(dilation), transposed, c10::fromIntArrayRefSlow(output_padding), c10::SymInt(groups),
      std::nullopt);
  if (weight.dim() == 3) {
    // The rule expands 1-d convolutions to 2-d (a contiguous input) before asking.
    std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
    sizes.insert(sizes.begin() + 2, 1);
    in = cpu_layout_probe(input, sizes, c10::contiguous_strides(sizes));
    std::vector<int64_t> w_sizes(weight.sizes().begin(), weight.sizes().end());
    std::vector<int64_t> w_strides(weight.strides().begin(), weight.strides().end());
    w_sizes.insert(w_sizes.begin() + 2, 1);
    w_strides.insert(w_strides.begin() + 2, weight.size(2) * weight.stride(2));  // as unsqueeze(2)
    w = cpu_layout_probe(weight, w_sizes, w_strides);
  }
  return at::native::_determine_backend_memory_format(in, w, backend);
}

// The key of a convolution's geometry: everything `cpu_kernel_memory_format` reads. ATen's
// backend rule reads the tensors' metadata (dtype, sizes, strides), the parameters and three
// pieces of global state (oneDNN and NNPACK switched on, the intra-op thread count: oneDNN's
// choice for 1x1 filters depends on it), so equal keys give equal answers.
using GeometryKey = c10::SmallVector<int64_t, 64>;

void append_tensor(GeometryKey& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back(-1);
    return;
  }
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(t.dim());
  key.append(t.sizes().begin(), t.sizes().end());
  key.append(t.strides().begin(), t.strides().end());
}

void append_ints(GeometryKey& key, at::IntArrayRef values) {
  key.push_back(static_cast<int64_t>(values.size()));
  key.append(values.begin(), values.end());
}

GeometryKey geometry_key(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                         at::IntArrayRef output_padding, int64_t groups) {
  GeometryKey key;
  append_tensor(key, input);
  append_tensor(key, weight);
  append_tensor(key, bias);
  append_ints(key, stride);
  append_ints(key, padding);
  append_ints(key, dilation);
  append_ints(key, output_padding);
  key.push_back(transposed);
  key.push_back(groups);
  const auto& ctx = at::globalContext();
  key.push_back(ctx.userEnabledMkldnn());
  key.push_back(ctx.userEnabledNNPACK());
  key.push_back(at::get_num_threads());
  return key;
}

// `cpu_kernel_memory_format`, remembered per geometry. Asking ATen's rule builds three probe
// tensors and runs the backend selection (~1.5 us, as much as the rest of the npu call
// around the CPU kernel); a compiled graph asks for the same few geometries on every run.
// Per thread, so no lock; a model has a handful of convolution geometries, and a thread that
// sees more than the cache holds starts it again.
at::MemoryFormat cached_cpu_kernel_memory_format(const at::Tensor& input, const at::Tensor& weight,
                                                 const at::Tensor& bias, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                                 at::IntArrayRef output_padding, int64_t groups) {
  constexpr size_t kCachedGeometries = 64;
  thread_local std::vector<std::pair<GeometryKey, at::MemoryFormat>> cache;
  GeometryKey key = geometry_key(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  for (const auto& entry : cache) {
    if (entry.first == key) return entry.second;
  }
  const at::MemoryFormat fmt =
      cpu_kernel_memory_format(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  if (cache.size() >= kCachedGeometries) cache.clear();
  cache.emplace_back(std::move(key), fmt);
  return fmt;
}

at::Tensor cpu_convolution_host_layout(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups) {
  return at::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

at::Tensor npu_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  std::vector<int64_t> s(C10_AS_INTARRAYREF_SLOW(stride).vec()), p(C10_AS_INTARRAYREF_SLOW(padding).vec()),
      d(C10_AS_INTARRAYREF_SLOW(dilation).vec()), op(C10_AS_INTARRAYREF_SLOW(output_padding).vec());
  int64_t g = groups.expect_int();
  at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  at::MemoryFormat fmt = fake_rule_memory_format(input, weight, bias, std::nullopt, stride, padding, dilation,
                                                 transposed, output_padding, groups);
  return run_on_device("aten::convolution_overrideable", {input, weight, b}, {"input", "weight", "bias"}, [=](const std::vector<at::Tensor>& t) {
    std::optional<at::Tensor> bb = t[2].defined() ? std::optional<at::Tensor>(t[2]) : std::nullopt;
    return std::vector<at::Tensor>{in_memory_format(at::convolution(t[0], t[1], bb, s, p, d, transposed, op, g), fmt)};
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
  std::vector<c10::SymInt> sym_bias_sizes(bias_sizes.begin(), bias_sizes.end());
  at::MemoryFormat fmt = fake_rule_memory_format(input, weight, std::nullopt, sym_bias_sizes, stride, padding,
                                                 dilation, transposed, output_padding, groups);
  auto outs = run_on_device("aten::convolution_backward_overrideable", {grad_output, input, weight},
                            {"grad_output", "input", "weight"}, [=](const std::vector<at::Tensor>& t) {
    auto r = at::convolution_backward(t[0], t[1], t[2], bias_sizes, s, p, d, transposed, op, g, output_mask);
    // The rule converts the input and weight gradients; the bias gradient keeps its layout.
    return std::vector<at::Tensor>{in_memory_format(std::get<0>(r), fmt), in_memory_format(std::get<1>(r), fmt),
                                   std::get<2>(r)};
  });
  return {outs[0], outs[1], outs[2]};
}

}  // namespace

at::Tensor npu_convolution_host_layout(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups) {
  std::vector<int64_t> s(stride.vec()), p(padding.vec()), d(dilation.vec()), op(output_padding.vec());
  at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  // The output must have the layout compiled code was planned with (the op is tagged
  // needs_exact_strides; its fake kernel asks the CPU backend rule). The CPU kernel writes
  // that layout, so the conversion is a no-op; it is applied anyway so that a kernel and a
  // rule that ever disagreed could not make compiled code read the buffer with wrong
  // strides. Captured, the output is allocated from a meta convolution, which answers for
  // the meta device: the conversion gives it the same layout. The rule's answer is cached by
  // geometry (see `cached_cpu_kernel_memory_format`).
  const at::MemoryFormat fmt = cached_cpu_kernel_memory_format(input, weight, b, s, p, d, transposed, op, groups);
  return run_on_device("npu::_convolution_host_layout", {input, weight, b}, {"input", "weight", "bias"},
                       [=](const std::vector<at::Tensor>& t) {
    std::optional<at::Tensor> bb = t[2].defined() ? std::optional<at::Tensor>(t[2]) : std::nullopt;
    return std::vector<at::Tensor>{in_memory_format(at::convolution(t[0], t[1], bb, s, p, d, transposed, op, groups),
                                                    fmt)};
  })[0];
}

TORCH_LIBRARY_FRAGMENT(npu, m) {
  // Its fake kernel (cpu's strides) is registered by the compiler layer, which uses it.
  m.def("_convolution_host_layout(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
        "int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
        {at::Tag::needs_exact_strides});
}

TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("_convolution_host_layout", TORCH_FN(npu_convolution_host_layout));
}

TORCH_LIBRARY_IMPL(npu, CPU, m) {
  m.impl("_convolution_host_layout", TORCH_FN(cpu_convolution_host_layout));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(npu_convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(npu_convolution_backward));
}

}  // namespace torch_npu
