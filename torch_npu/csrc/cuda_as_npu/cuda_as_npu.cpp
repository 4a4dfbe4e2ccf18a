// transfer_to_npu's eager half: "cuda" device arguments become npu where c10 dispatches
// them, so that calls without one (a + b on npu tensors) pay nothing.
//
// In a CPU build of PyTorch a CUDA device reaches three places, and each has a
// registration point that this file fills while transfer_to_npu is applied (never at
// import, and removed again by disable()):
// * the dispatcher: a factory with device="cuda" (torch.zeros, Tensor.to("cuda")'s empty,
//   .cuda(), new_*, torch.tensor) is routed by BackendSelect to the CUDA dispatch key,
//   which has no kernel here. A boxed fallback for that key (torch::Library, as
//   TORCH_LIBRARY_IMPL(_, CUDA, m) would register it, but made at run time) rewrites every
//   CUDA device argument of the call to npu and calls the operator again.
// * device guards: composite kernels and the Python bindings put a DeviceGuard on the
//   target device. A CUDA guard implementation (the c10 guard registry) forwards to the npu
//   one with the device type swapped.
// * lazy device initialisation: the Python bindings ask torch.cuda._lazy_init() before the
//   first CUDA factory; torch::utils::set_requires_device_init marks CUDA as initialised
//   (npu initialises itself on first use).
// A CUDA tensor is never made: every tensor created this way is an npu tensor. And so that
// x.to("cuda") / x.cuda() return x itself for an npu tensor x, as they do for a CUDA tensor
// on CUDA, Tensor.to's two device overloads get npu kernels (at PrivateUse1 and its autograd
// key) that read a cuda device as npu before PyTorch's own implementation decides whether
// to copy.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/to_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <memory>

namespace {

constexpr c10::DeviceType kCuda = c10::DeviceType::CUDA;
constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

c10::Device as_npu(c10::Device d) { return c10::Device(kNpu, d.index()); }
c10::Device as_cuda(c10::Device d) { return c10::Device(kCuda, d.index()); }
c10::Stream stream_as(c10::Stream s, c10::DeviceType type) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(type, s.device_index()), s.id());
}

const c10::impl::DeviceGuardImplInterface* npu_guard() {
  return c10::impl::getDeviceGuardImpl(kNpu);
}

// A CUDA device, as far as a guard is concerned, is the npu device of the same index.
struct CudaAsNpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kCuda; }
  c10::Device exchangeDevice(c10::Device d) const override {
    return as_cuda(npu_guard()->exchangeDevice(as_npu(d)));
  }
  c10::Device getDevice() const override { return as_cuda(npu_guard()->getDevice()); }
  void setDevice(c10::Device d) const override { npu_guard()->setDevice(as_npu(d)); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    npu_guard()->uncheckedSetDevice(as_npu(d));
  }
  c10::Stream getStream(c10::Device d) const override {
    return stream_as(npu_guard()->getStream(as_npu(d)), kCuda);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return stream_as(npu_guard()->getDefaultStream(as_npu(d)), kCuda);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return stream_as(npu_guard()->exchangeStream(stream_as(s, kNpu)), kCuda);
  }
  c10::DeviceIndex deviceCount() const noexcept override { return npu_guard()->deviceCount(); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    npu_guard()->synchronizeDevice(device_index);
  }
};

CudaAsNpuGuardImpl g_cuda_guard;
std::unique_ptr<torch::Library> g_cuda_library;
std::unique_ptr<torch::Library> g_to_library;
std::unique_ptr<torch::Library> g_to_autograd_library;

c10::Device npu_if_cuda(c10::Device d) { return d.type() == kCuda ? as_npu(d) : d; }

at::Tensor to_device(const at::Tensor& self, at::Device device, at::ScalarType dtype, bool non_blocking,
                     bool copy, std::optional<at::MemoryFormat> memory_format) {
  return at::native::to(self, npu_if_cuda(device), dtype, non_blocking, copy, memory_format);
}

at::Tensor to_dtype_layout(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory, bool non_blocking, bool copy,
                           std::optional<at::MemoryFormat> memory_format) {
  if (device.has_value()) device = npu_if_cuda(*device);
  return at::native::to(self, dtype, layout, device, pin_memory, non_blocking, copy, memory_format);
}

// Tensor.to's device overloads for npu tensors, at `key` (the autograd key too: with a
// backend kernel, PyTorch's composite no longer serves it; at::native::to dispatches its
// copy from the top, so autograd records it as usual).
std::unique_ptr<torch::Library> to_kernels(c10::DispatchKey key) {
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  library->impl("to.device", TORCH_FN(to_device));
  library->impl("to.dtype_layout", TORCH_FN(to_dtype_layout));
  return library;
}

void cuda_key_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_arguments = op.schema().arguments().size();
  bool rewritten = false;
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(num_arguments); it != stack->end(); ++it) {
    if (it->isDevice() && it->toDevice().type() == kCuda) {
      *it = c10::IValue(as_npu(it->toDevice()));
      rewritten = true;
    }
  }
  // Without a cuda device argument the call came here from a tensor that claims the CUDA
  // key (a fake tensor on a "cuda" fake device); calling again would come back here.
  TORCH_CHECK_NOT_IMPLEMENTED(
      rewritten, "Could not run '", op.schema().operator_name(),
      "' with arguments from the 'CUDA' backend: this PyTorch has no CUDA. transfer_to_npu "
      "maps cuda device arguments to npu, but this call has none; make its tensors npu tensors.");
  op.callBoxed(stack);
}

bool enabled() { return g_cuda_library != nullptr; }

void enable() {
  if (enabled()) return;
  TORCH_CHECK(!c10::impl::hasDeviceGuardImpl(kCuda),
              "transfer_to_npu needs a PyTorch built without CUDA: this one has a CUDA runtime, "
              "so run the script on CUDA, or install the CPU build of torch");
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::CUDA,
                                                  __FILE__, __LINE__);
  library->fallback(torch::CppFunction::makeFromBoxedFunction<&cuda_key_fallback>());
  auto to_library = to_kernels(c10::DispatchKey::PrivateUse1);
  auto to_autograd_library = to_kernels(c10::DispatchKey::AutogradPrivateUse1);
  c10::impl::DeviceGuardImplRegistrar(kCuda, &g_cuda_guard);
  torch::utils::set_requires_device_init(at::kCUDA, false);
  g_cuda_library = std::move(library);
  g_to_library = std::move(to_library);
  g_to_autograd_library = std::move(to_autograd_library);
}

void disable() {
  if (!enabled()) return;
  torch::utils::set_requires_device_init(at::kCUDA, true);
  c10::impl::device_guard_impl_registry[static_cast<size_t>(kCuda)].store(nullptr);
  g_to_autograd_library.reset();  // each reset deregisters what the library registered
  g_to_library.reset();
  g_cuda_library.reset();
}

}  // namespace

namespace torch_npu {

void register_cuda_as_npu(py::module& m) {
  m.def("_cuda_as_npu_enable", &enable,
        "Make cuda device arguments dispatch to npu (transfer_to_npu; undone by _cuda_as_npu_disable).");
  m.def("_cuda_as_npu_disable", &disable);
  m.def("_cuda_as_npu_enabled", &enabled);
}

}  // namespace torch_npu
