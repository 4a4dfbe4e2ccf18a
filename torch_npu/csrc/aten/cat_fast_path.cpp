// An unboxed npu kernel of cat: the tensor list otherwise goes through the boxed fallback
// (a CPU alias of every tensor, an adopted output).
//
// When every tensor is a plain npu tensor of one device and the fast path may serve the
// call (fast_path.h), ATen's structured CPU kernel runs on the npu tensors themselves: its
// meta function checks the tensors and picks the output's geometry and memory format, the
// output comes from the device's caching allocator, and its impl copies each tensor into
// its slice with the CPU copy loops (copy_stub's npu entry is the CPU kernel: npu memory
// is host memory). Every other call goes to the operator fallback.

// First: it sets up DispatchStub.h for calling the stubs' CPU kernels.
#include "torch_npu/csrc/aten/iterator_on_npu.h"

#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/graphs/capture.h"

#include <ATen/native/Copy.h>
#include <ATen/ops/cat_native.h>
#include <torch/library.h>

#include <vector>

namespace torch_npu {
namespace {

void copy_on_host(at::TensorIterator& iter, bool non_blocking) {
  at::native::copy_stub(c10::DeviceType::CPU, iter, non_blocking);
}

}  // namespace
}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(copy_stub, &torch_npu::copy_on_host)
}  // namespace at::native

namespace torch_npu {
namespace {

// The device every tensor of `tensors` is on, or -1 when the fallback must serve the call.
c10::DeviceIndex fast_list_device(const at::MaterializedITensorListRef& tensors) {
  if (!fast_paths_allowed() || tensors.empty()) return -1;
  const c10::DeviceIndex device = tensors.front().get().device().index();
  for (const at::Tensor& t : tensors) {
    if (!is_plain_npu(t) || t.device().index() != device) return -1;
  }
  return active_capture() == nullptr ? device : -1;  // last, as in fast_binary_device
}

// The functional form of cat's structured kernel (a MetaBase, not an iterator): its output
// is a new npu tensor of the geometry the meta function asks for, as the generated CPU
// wrapper's create_out makes it.
struct NpuCat final : at::native::structured_cat_out_cpu {
  void set_output_strided(int64_t /*output_idx*/, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    output = empty_npu_output(sizes, strides, options);
  }
  void set_output_raw_strided(int64_t /*output_idx*/, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    output = empty_npu_output(sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override { return output; }
  at::Tensor output;
};

at::Tensor npu_cat(const at::ITensorListRef& tensors, int64_t dim) {
  static FastOperator fast("aten::cat", "");
  const at::MaterializedITensorListRef materialized = tensors.materialize();
  const c10::DeviceIndex device = fast_list_device(materialized);
  if (device < 0) {
    std::vector<at::Tensor> list(materialized.begin(), materialized.end());
    return run_fallback(fast.op, std::move(list), dim).toTensor();
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);  // the output's memory comes from this device
  NpuCat kernel;
  auto precompute = kernel.meta(tensors, dim);
  kernel.impl(tensors, precompute.dim, precompute.valid, precompute.all_contiguous, precompute.all_same_dtype,
              precompute.all_same_sizes_and_stride, precompute.memory_format, kernel.output);
  return std::move(kernel.output);
}

}  // namespace

void register_cat_fast_path(torch::Library& m) { m.impl("cat", TORCH_FN(npu_cat)); }

}  // namespace torch_npu
