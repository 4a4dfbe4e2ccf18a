// NPU graphs: the recorded work of one capture and its replay (torch.npu.NPUGraph).
#pragma once

#include "torch_npu/csrc/graphs/capture.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <Python.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_npu {

// How a capture treats host syncs outside the captured stream (CUDA's cudaStreamCaptureMode):
// "global" forbids them on every thread while the capture is underway, "thread_local" only
// on the capturing thread, "relaxed" nowhere. A host wait on the captured stream's own work
// always aborts the capture.
enum class CaptureErrorMode { Global, ThreadLocal, Relaxed };
CaptureErrorMode parse_capture_error_mode(const std::string& mode);

// One problem a check run found: what would have broken a capture, and where.
struct CaptureProblem {
  std::string kind;    // "host sync", "dynamic output shape", "unsupported op", "host value",
                       // "generator state", "unregistered generator"
  std::string op;      // the operator or call
  std::string detail;  // the message a capture would have raised
};
using CaptureProblemSink = std::function<void(const CaptureProblem&)>;

// The overlap error the CPU kernel of `op` raises on `cpu_args` (CPU aliases of the npu
// arguments, views of one npu storage sharing one CPU storage), if it refuses their
// aliasing; found without touching their memory (capture_overlap.cpp).
std::optional<std::string> capture_overlap_refusal(const c10::OperatorHandle& op,
                                                   const std::vector<c10::IValue>& cpu_args);

// One recorded step: a C++ call, or a Python host kernel called with a prebuilt argument
// tuple (Inductor's kernels), which replay calls without building anything.
struct GraphNode {
  std::function<void()> native;
  PyObject* callable = nullptr;  // owned references; released with the GIL held
  PyObject* args = nullptr;
};

// A recorded sequence of npu work that can be replayed on the same memory. Every public
// call is safe against the others from any thread (a reset() during another thread's
// replay() waits for the replay to finish).
class NpuGraph {
 public:
  NpuGraph();
  ~NpuGraph();
  // Lets calls recorded by the next captures draw from `generator` (the default generators
  // need no registration): each replay then draws at its offset and advances it, as CUDA's
  // CUDAGraph.register_generator_state. Not during this graph's capture.
  void register_generator_state(const at::Generator& generator);
  void capture_begin(int64_t pool, const std::string& capture_error_mode);
  // A check run: the work of the current stream runs as usual, and every operation a capture
  // could not record is passed to `sink` instead of aborting.
  void check_begin(CaptureProblemSink sink);
  void capture_end();
  void replay();
  void reset();
  int64_t pool() const { return pool_; }
  size_t num_nodes() const;
  size_t num_kernel_launches() const;  // recorded Python host kernels (Inductor's)

 private:
  std::vector<GraphNode> take_nodes_locked();
  mutable std::mutex mu_;
  std::shared_ptr<GraphCapture> capture_;
  std::vector<GraphNode> nodes_;
  std::vector<at::Tensor> keep_alive_;
  std::vector<at::Generator> registered_generators_;
  std::string abort_reason_;
  int64_t pool_ = 0;
  bool captured_ = false;
  bool has_python_nodes_ = false;
};

// Records a call of the Python host kernel `callable(*args)` into the capture of the current
// stream; takes new references to both. Needs the GIL. `observed(call)`, if given, wraps the
// call in what announces it to the profiler and the stream sanitizer (replays they watch).
using ObservedCall = std::function<std::function<void()>(std::function<void()>)>;
void record_python_call(PyObject* callable, PyObject* args, const ObservedCall& observed = nullptr);

int64_t graph_pool_handle();

}  // namespace torch_npu
