// One capture underway, as the files of graph capture share it: graph.cpp registers it
// with its stream and ends it, record_operator.cpp records operator calls into it.
#pragma once

#include "torch_npu/csrc/graphs/npu_graph.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace torch_npu {

class GraphCapture {
 public:
  GraphCapture(uint64_t id, int64_t pool, c10::Stream stream, CaptureErrorMode mode, CaptureProblemSink sink)
      : id(id), pool(pool), device(stream.device_index()), owner(std::this_thread::get_id()), mode(mode),
        sink(std::move(sink)), streams{stream.id()} {}

  bool checking() const { return static_cast<bool>(sink); }

  // Records a node. Tensors whose memory lives outside the graph's pool are kept alive
  // for as long as the graph (replay reads and writes them); memory of the pool is left
  // to the pool, so a block freed during capture is reused by later recorded work, in
  // the order replay follows, as on real hardware.
  void add_node(GraphNode node, std::vector<at::Tensor> keep) {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return;
    nodes.push_back(std::move(node));
    for (auto& t : keep) {
      // Absent optional tensors (a conv without bias, a gradient masked out) own nothing.
      if (!t.defined()) continue;
      const void* base = t.storage().data();
      if (base != nullptr && pool_of_ptr(base) == pool) continue;
      keep_alive.push_back(std::move(t));
    }
  }

  const uint64_t id;
  const int64_t pool;
  const c10::DeviceIndex device;
  const std::thread::id owner;
  const CaptureErrorMode mode;
  const CaptureProblemSink sink;
  std::vector<c10::StreamId> streams;  // guarded by the registry lock
  // Generators besides the default ones that recorded calls may draw from
  // (NPUGraph.register_generator_state), fixed at capture_begin.
  std::vector<at::Generator> registered_generators;
  std::mutex mu;                       // guards what follows
  std::vector<GraphNode> nodes;
  std::vector<at::Tensor> keep_alive;
  std::string abort_reason;
  bool aborted = false;
};

// Ends `c` because of `message`: nothing it recorded survives, its stream runs work again,
// and its graph's capture_end() reports the reason.
[[noreturn]] void abort_capture(const std::shared_ptr<GraphCapture>& c, const std::string& message);
// Passes one problem of a check run to its sink.
void report_capture_problem(const std::shared_ptr<GraphCapture>& c, const std::string& kind, const std::string& op,
                            const std::string& detail);

}  // namespace torch_npu
