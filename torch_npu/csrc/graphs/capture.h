// Graph capture as the rest of the runtime sees it (graph.cpp).
//
// A capture belongs to a stream: work queued on a stream being captured (by any thread,
// e.g. autograd's device threads running a backward on its forward's stream) is recorded
// instead of run; work on other streams runs.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace torch_npu {

class GraphCapture;
// The capture of this thread's current stream on the current device (recording or
// checking), or nullptr.
std::shared_ptr<GraphCapture> active_capture();
// True when work queued now would be recorded (a capture that is not a check run).
bool is_recording();
// The graph pool allocations on `device` are drawn from now (0: the ordinary cache).
int64_t capture_pool_for_allocation(c10::DeviceIndex device);
// Called before anything that makes the host wait for the device: raises (aborting the
// capture of the waited-for stream) where the capture rules forbid it.
void check_not_capturing(const char* what);
// The same for a wait on `stream`, and on every stream of `device` (torch.npu.synchronize()).
void check_stream_sync(const c10::Stream& stream, const char* what);
void check_device_sync(c10::DeviceIndex device, const char* what);
// Events: an event recorded on a capturing stream carries the capture's id; a stream
// that waits on it joins that capture (fork/join of side streams, as on CUDA).
uint64_t capture_id_of_stream(const c10::Stream& stream);
void join_capture(uint64_t capture_id, const c10::Stream& stream);
bool is_capture_underway(uint64_t capture_id);

// Called by the generators before their state is read or changed: raises while the
// current stream is being captured, as CUDA's generators do (a check run reports it).
void check_generator_not_capturing(const char* what);

// The npu generators of an operator call: argument index -> generator.
using GeneratorArguments = std::vector<std::pair<size_t, at::Generator>>;

// Records a boxed operator call into the active capture. `stack` holds the arguments
// with npu tensors already replaced by their CPU aliases and npu generators by their
// engines (`generators` names the npu generators); on return it holds the operator's
// outputs (npu tensors from the graph's pool), computed without running. Returns false
// (recording nothing) when the active capture is a check run: the caller then runs the
// operator.
bool record_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::vector<std::pair<at::Tensor, at::Tensor>>& npu_to_cpu,
                     c10::DeviceIndex device, const GeneratorArguments& generators);
// Records a host call into the active capture; `keep` are the npu tensors it uses.
void record_host_call(std::function<void()> fn, std::vector<at::Tensor> keep = {});

}  // namespace torch_npu
