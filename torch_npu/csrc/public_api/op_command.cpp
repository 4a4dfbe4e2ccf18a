// at_npu::native::OpCommand on the simulated NPU: a command's custom handler is its
// kernel, launched on the current stream like the runtime's own kernels: run at once
// (announced to the profiler and the stream sanitizer with the command's inputs and
// outputs), or recorded into the NPUGraph capturing that stream and run at each replay.
#include "torch_npu/csrc/framework/OpCommand.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>

#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/stream.h"

namespace at_npu::native {
namespace {

// The device of the command: that of its first npu tensor, else the current device.
c10::DeviceIndex command_device(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  for (const auto* list : {&outputs, &inputs}) {
    for (const auto& t : *list) {
      if (t.defined() && t.device().type() == torch_npu::kNpu) return t.device().index();
    }
  }
  return torch_npu::current_device();
}

}  // namespace

OpCommand::OpCommand() = default;
OpCommand::~OpCommand() = default;

OpCommand& OpCommand::Name(const string& name) {
  name_ = name;
  return *this;
}

OpCommand& OpCommand::SetCustomHandler(PROC_FUNC func) {
  handler_ = std::move(func);
  return *this;
}

// Dynamic input registration and result expectations shape a CANN operator's graph;
// the custom handler that runs here takes its tensors itself.
OpCommand& OpCommand::DynamicInputReg(DynamicInputRegFunc /*func*/, DyNumAndIndex /*num_and_index*/) { return *this; }
OpCommand& OpCommand::Expect(UnifiedResult /*unified_result*/) { return *this; }

OpCommand& OpCommand::Input() {
  inputs_.emplace_back();
  return *this;
}

OpCommand& OpCommand::Input(const at::Tensor& input, const string& /*descName*/,
                            const c10::optional<aclFormat>& /*sensitive_format*/, const string& /*realData*/) {
  inputs_.push_back(input);
  return *this;
}

OpCommand& OpCommand::InputWithoutContiguous(const at::Tensor& input, const string& /*descName*/,
                                             const string& /*realData*/) {
  inputs_.push_back(input);
  return *this;
}

OpCommand& OpCommand::Input(const c10::IntArrayRef& dimListRef, at::ScalarType toType, CompileType compileType,
                            const string& /*realDtype*/, const string& descName) {
  std::vector<double> values(dimListRef.begin(), dimListRef.end());
  return HostInput(values, {static_cast<int64_t>(values.size())}, toType, compileType, descName);
}

OpCommand& OpCommand::Input(const c10::ArrayRef<double>& dimListRef, at::IntArrayRef realShape, at::ScalarType toType,
                            CompileType compileType, const string& /*realDtype*/) {
  std::vector<double> values(dimListRef.begin(), dimListRef.end());
  return HostInput(values, realShape, toType, compileType, "");
}

OpCommand& OpCommand::Input(const c10::Scalar& input, const at::ScalarType type, CompileType /*compileType*/) {
  return InputScalarToNPUTensor(input, type);
}

OpCommand& OpCommand::Inputs(const at::TensorList& inputs) {
  for (const auto& t : inputs) inputs_.push_back(t);
  return *this;
}

OpCommand& OpCommand::InputScalarToNPUTensor(const c10::Scalar& input, const at::ScalarType type) {
  at::Tensor host = at::scalar_tensor(input, at::TensorOptions().dtype(type));
  inputs_.push_back(host.to(c10::Device(torch_npu::kNpu, command_device(inputs_, outputs_))));
  return *this;
}

OpCommand& OpCommand::HostInput(const std::vector<double>& values, at::IntArrayRef shape, at::ScalarType toType,
                                CompileType /*compileType*/, const string& /*descName*/) {
  at::Tensor host = at::tensor(values, at::TensorOptions().dtype(at::kDouble));
  if (!shape.empty()) {
    TORCH_CHECK(c10::multiply_integers(shape) == static_cast<int64_t>(values.size()), "OpCommand ", name_,
                ": a host input of ", values.size(), " values cannot have shape ", shape);
    host = host.reshape(shape);
  }
  inputs_.push_back(host.to(toType).to(c10::Device(torch_npu::kNpu, command_device(inputs_, outputs_))));
  return *this;
}

OpCommand& OpCommand::Output(at::Tensor& output, const string& /*descName*/,
                             const c10::optional<aclFormat>& /*sensitive_format*/, const string& /*realType*/) {
  TORCH_CHECK(output.defined(), "OpCommand ", name_, ": an output must be an allocated tensor");
  outputs_.push_back(output);
  return *this;
}

OpCommand& OpCommand::Sync() {
  sync_ = true;
  return *this;
}

void OpCommand::Run() {
  TORCH_CHECK(handler_, "OpCommand ", name_.empty() ? std::string("(unnamed)") : name_,
              ": the simulated NPU has no CANN operators; give the command its computation with "
              "SetCustomHandler (host code over the tensors' memory)");
  const std::string name = name_.empty() ? std::string("OpCommand") : name_;
  const c10::DeviceIndex device = command_device(inputs_, outputs_);
  c10::DeviceGuard device_guard(c10::Device(torch_npu::kNpu, device));

  std::vector<torch_npu::observe::TensorAccess> accesses;
  for (const auto& t : inputs_) torch_npu::observe::add_access(accesses, t, false, false, "input");
  for (const auto& t : outputs_) torch_npu::observe::add_access(accesses, t, true, true, "output");
  PROC_FUNC handler = handler_;
  auto call = [handler, name]() {
    int status = handler();
    TORCH_CHECK(status == 0, "OpCommand ", name, ": its custom handler failed with status ", status);
  };

  if (torch_npu::is_recording()) {
    TORCH_CHECK(!sync_, "OpCommand ", name,
                ": Sync() makes the host wait for the command, which is not allowed while the stream is captured "
                "into an NPUGraph");
    std::vector<at::Tensor> keep;
    for (const auto* list : {&inputs_, &outputs_}) {
      for (const auto& t : *list) {
        if (t.defined()) keep.push_back(t);
      }
    }
    torch_npu::record_host_call(torch_npu::observe::replayed_node(name, device, std::move(accesses), call),
                                std::move(keep));
    return;
  }

  const c10::Stream stream = torch_npu::current_stream(device);
  if (torch_npu::observe::watching()) {
    RECORD_FUNCTION(name, std::vector<c10::IValue>());
    torch_npu::observe::KernelLaunch launch(torch_npu::observe::WorkKind::Kernel, name);
    launch.accesses() = std::move(accesses);
    launch.start(stream);
    call();
  } else {
    call();
  }
  if (sync_) torch_npu::check_stream_sync(stream, "OpCommand::Sync");
}

}  // namespace at_npu::native
