// ProcessGroupHCCL: the c10d backend for npu tensors.
//
// npu memory is host memory, so the bytes move through PyTorch's own Gloo backend: every
// npu tensor is handed to it as a CPU tensor over the same storage (no copy). Around the
// transport this backend adds what Gloo lacks for a device: npu tensor checks, ReduceOp.AVG
// and PREMUL_SUM, work objects whose futures carry npu tensors, a signature check before
// any byte moves (hccl_board.h), and errors that say which collective failed, which rank
// is to blame and what every rank did last.
#pragma once

#include "torch_npu/csrc/distributed/hccl_board.h"
#include "torch_npu/csrc/distributed/ProcessGroupHCCL.hpp"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace torch_npu::hccl {

// State shared by a process group and its work objects (works may outlive the group).
struct GroupState {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Board> board;
  std::chrono::milliseconds timeout{0};
  double dump_after_s = 0;  // TORCH_HCCL_DUMP_AFTER_SEC: report a wait this long, once
  std::atomic<bool> broken{false};
  std::mutex mu;
  std::string broken_reason;

  void mark_broken(const std::string& reason);
  std::string describe_group() const;
};

class WorkHCCL : public c10d::Work {
 public:
  bool wait_for_transport(std::chrono::milliseconds timeout);
  WorkHCCL(int rank, c10d::OpType type, uint64_t seq, Signature sig, std::vector<at::Tensor> outputs,
           std::shared_ptr<GroupState> state, bool point_to_point);
  ~WorkHCCL() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;

  // Completion, from the transport's thread.
  void complete();
  void fail(std::exception_ptr error);
  void set_transport_work(c10::intrusive_ptr<c10d::Work> inner);
  // For transport works without a future: completion is observed in wait() and
  // isCompleted(), which then run `finish`.
  void complete_on_wait(std::function<void()> finish) {
    wait_driven_ = true;
    finish_ = std::move(finish);
  }

  // The error for a transport failure of this work, with the diagnosis.
  std::exception_ptr diagnose(const std::string& transport_error) const;

 private:
  const uint64_t seq_;
  const Signature sig_;
  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<GroupState> state_;
  const bool point_to_point_;
  c10::intrusive_ptr<c10d::Work> inner_;
  bool wait_driven_ = false;
  std::function<void()> finish_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

// The public c10d_npu::ProcessGroupHCCL (torch_npu/include) is its base.
class ProcessGroupHCCL : public c10d_npu::ProcessGroupHCCL {
 public:
  struct Options : c10d::Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout)
        : c10d::Backend::Options("hccl", timeout) {}
  };

  ProcessGroupHCCL(c10::intrusive_ptr<c10d::Backend> transport, std::shared_ptr<Board> board, int rank, int size,
                   c10::intrusive_ptr<Options> options, double dump_after_s);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override { return "hccl"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  void setGroupUid(const std::string& pg_uid) override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;
  void abort() override;
  void shutdown() override;
  void eagerConnectSingleDevice(at::Device /*device*/) override {}
  // torch.distributed._coalescing_manager(group, device): the collectives issued in between
  // run as they are issued, and endCoalescing returns one work over all of them.
  // supportsCoalescing() stays false: torch.distributed.batch_isend_irecv keeps one work per
  // operation (the C++ batch_isend_irecv returns one work over all).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  const std::shared_ptr<GroupState>& state() const { return state_; }
  // A checked receive waiting for its send to be posted (see dispatch_receives).
  struct PendingRecv {
    c10::intrusive_ptr<WorkHCCL> work;
    std::vector<at::Tensor> views;
    int src;
    uint64_t n;  // the n-th tag-0 receive from src
    Signature sig;
    int64_t deadline_ns;
    int64_t checked_ns;
  };
  const c10::intrusive_ptr<c10d::Backend>& transport() const { return transport_; }

 private:
  using Start = std::function<c10::intrusive_ptr<c10d::Work>(std::chrono::milliseconds)>;
  using Finish = std::function<void()>;
  // `outputs` are written by the collective; `inputs` of an out-of-place collective are
  // only read (the stream sanitizer checks both on the collective stream).
  c10::intrusive_ptr<c10d::Work> collective(Op op, const Signature& sig, std::vector<at::Tensor> outputs,
                                            std::chrono::milliseconds requested_timeout, c10d::OpType type,
                                            const Start& start, Finish finish = nullptr,
                                            const std::vector<at::Tensor>& inputs = {});
  c10::intrusive_ptr<c10d::Work> point_to_point(Op op, const Signature& sig, std::vector<at::Tensor> tensors,
                                                c10d::OpType type, const Start& start);
  // Inside an NPU graph capture: records `reissue` (the same call) for the replays and
  // returns a completed work; nothing is sent at capture time, as NCCL's captured kernels.
  c10::intrusive_ptr<c10d::Work> capture(Op op, c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<c10::intrusive_ptr<c10d::Work>()> reissue);
  c10::intrusive_ptr<c10d::Work> issue_collective(Op op, const Signature& sig, std::vector<at::Tensor> outputs,
                                                  std::chrono::milliseconds requested_timeout, c10d::OpType type,
                                                  const Start& start, Finish finish,
                                                  const std::vector<at::Tensor>& inputs);
  // Keeps `work` for endCoalescing while coalescing; returns it.
  c10::intrusive_ptr<c10d::Work> coalesce(c10::intrusive_ptr<c10d::Work> work);
  void check_usable(Op op) const;
  std::string remote_check(uint64_t seq, const Signature& sig, std::chrono::milliseconds timeout);

  // Receives are posted to the transport only once the matching send's signature is on the
  // board (a receive buffer smaller than the message would crash the transport), by one
  // thread, in order per source, so that irecv/isend in any order never block the caller.
  void enqueue_receive(PendingRecv recv);
  void dispatch_receives();
  void stop_receives();

  c10::intrusive_ptr<c10d::Backend> transport_;
  c10::intrusive_ptr<Options> options_;
  std::shared_ptr<GroupState> state_;
  std::mutex issue_mu_;  // signature order and transport order must be the same
  std::mutex recv_mu_;
  std::condition_variable recv_cv_;
  std::vector<std::deque<PendingRecv>> pending_recvs_;  // per source
  std::vector<uint64_t> recv_counts_;                   // tag-0 receives issued per source
  std::thread recv_thread_;
  bool recv_stop_ = false;
  std::mutex coalesce_mu_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
};

}  // namespace torch_npu::hccl
