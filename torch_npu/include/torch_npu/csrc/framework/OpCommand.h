// at_npu::native::OpCommand: how an npu kernel is described and launched on the current
// stream.
//
// On Ascend hardware a command names a CANN operator and its inputs, outputs and
// attributes. The simulated NPU has no CANN operators: a command runs the computation
// given with SetCustomHandler (host code over the tensors' device memory, which is host
// memory here). Run() launches it on the current stream like any npu kernel: it runs
// now, or, while the stream is being captured into an NPUGraph, it is recorded and runs
// at each replay (so the handler must read its tensors' memory when it runs, not
// capture values computed before). A command with no handler raises, naming the operator.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>
#include <c10/util/SmallVector.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace ge {
class Operator;
using OperatorPtr = std::shared_ptr<Operator>;
}  // namespace ge

namespace at_npu::native {

using std::string;

// Whether a host-side input's value is known when the operator is compiled.
enum CompileType {
  MEMORY_HOST_COMPILE_DEPENDENT = 1,
  MEMORY_HOST_COMPILE_INDEPENDENT = 2,
};

// The result type and shape an operator's inputs promote to.
struct UnifiedResult {
  c10::optional<at::ScalarType> common_type = c10::nullopt;
  c10::optional<c10::IntArrayRef> common_shape = c10::nullopt;
  bool result_type_defined = false;
};

// Returns 0 on success, an error code otherwise.
using PROC_FUNC = std::function<int()>;
using DyNumAndIndex = std::vector<std::pair<uint32_t, uint32_t>>;
using DynamicInputRegFunc = std::function<ge::OperatorPtr(DyNumAndIndex, std::string)>;

class TORCH_NPU_API OpCommand {
 public:
  OpCommand();
  ~OpCommand();
  OpCommand(const OpCommand&) = delete;
  OpCommand& operator=(const OpCommand&) = delete;

  OpCommand& Name(const string& name);
  OpCommand& SetCustomHandler(PROC_FUNC func);
  OpCommand& DynamicInputReg(DynamicInputRegFunc func, DyNumAndIndex num_and_index);
  OpCommand& Expect(UnifiedResult unified_result);

  // An absent optional input.
  OpCommand& Input();
  OpCommand& Input(const at::Tensor& input, const string& descName = "",
                   const c10::optional<aclFormat>& sensitive_format = c10::nullopt, const string& realData = "");
  OpCommand& InputWithoutContiguous(const at::Tensor& input, const string& descName = "", const string& realData = "");
  // Host values handed to the operator as a tensor input of dtype toType.
  template <typename T>
  OpCommand& Input(const c10::ArrayRef<T>& dimListRef, at::IntArrayRef realShape, at::ScalarType toType,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "",
                   const string& descName = "") {
    std::vector<double> values(dimListRef.begin(), dimListRef.end());
    return HostInput(values, realShape, toType, compileType, descName);
  }
  OpCommand& Input(const c10::IntArrayRef& dimListRef, at::ScalarType toType = at::kLong,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "",
                   const string& descName = "");
  OpCommand& Input(const c10::ArrayRef<double>& dimListRef, at::IntArrayRef realShape,
                   at::ScalarType toType = at::kDouble,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "");
  OpCommand& Input(const c10::Scalar& input, const at::ScalarType type,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_INDEPENDENT);
  OpCommand& Inputs(const at::TensorList& inputs);
  OpCommand& InputScalarToNPUTensor(const c10::Scalar& input, const at::ScalarType type);

  OpCommand& Output(at::Tensor& output, const string& descName = "",
                    const c10::optional<aclFormat>& sensitive_format = c10::nullopt, const string& realType = "");

  template <typename dataType>
  OpCommand& Attr(const string& name, dataType value) {
    attr_names_.push_back(name);
    return *this;
  }
  template <typename dataType>
  OpCommand& Attr(const string& name, dataType value, bool cond) {
    return cond ? Attr(name, value) : *this;
  }

  // Launches the command on the current stream of its tensors' device.
  void Run();

  // The host waits for the command to finish (the listed outputs are then readable).
  template <unsigned N>
  OpCommand& Sync(c10::SmallVector<int64_t, N>& sync_index) {
    return Sync();
  }
  OpCommand& Sync();

  const std::vector<at::Tensor>& inputs() const { return inputs_; }
  const std::vector<at::Tensor>& outputs() const { return outputs_; }

 private:
  OpCommand& HostInput(const std::vector<double>& values, at::IntArrayRef shape, at::ScalarType toType,
                       CompileType compileType, const string& descName);

  string name_;
  PROC_FUNC handler_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> outputs_;
  std::vector<string> attr_names_;
  bool sync_ = false;
};

}  // namespace at_npu::native
