// The collective board of an hccl process group: what each rank is doing, visible to all.
//
// Every rank of a group posts a fixed-size signature of each collective (op, dtype,
// element counts, root, reduce op) to its slot before any byte moves, and waits until
// every peer has posted the same sequence number. Mismatched calls are then a clear error
// instead of a transport crash or silent garbage, a rank that never arrives is named when
// the timeout expires, and a rank whose process died is noticed within a fraction of a
// second. The slots also keep each rank's last collectives, which is what the timeout
// errors and the on-demand dump print (the same facts PyTorch's flight recorder records
// for NCCL).
//
// When all ranks run on one host the board lives in shared memory, so the check costs no
// network round trip. Otherwise each rank keeps a private board (its own slot only) and
// the process group checks signatures over the transport instead.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_npu::hccl {

enum class Op : uint8_t {
  kNone = 0,
  kAllReduce,
  kAllReduceCoalesced,
  kBroadcast,
  kReduce,
  kAllGather,
  kAllGatherIntoTensor,
  kAllGatherCoalesced,
  kAllGatherIntoTensorCoalesced,
  kGather,
  kScatter,
  kReduceScatter,
  kReduceScatterTensor,
  kReduceScatterTensorCoalesced,
  kAllToAllSingle,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv,
};

// The name users know the op by (torch.distributed function names).
const char* op_name(Op op);
bool is_point_to_point(Op op);

constexpr int kMaxDims = 6;
constexpr int kMaxSplitRanks = 16;

// What must agree across ranks for one collective. Plain data: it lives in shared memory.
struct Signature {
  uint8_t op;
  uint8_t reduce_op;  // c10d::ReduceOp::RedOpType, for reducing ops
  int8_t dtype;       // at::ScalarType of the tensors, -1 when there are none
  uint8_t ndim;       // of `dims`, the shape of the first tensor (for reports)
  int32_t root;       // rooted ops; -1 otherwise
  int32_t peer;       // point-to-point ops; -1 otherwise
  int32_t tag;
  int32_t ntensors;
  int32_t nsplits;    // entries in the split arrays (all-to-all), 0 for even splits
  int64_t in_numel;
  int64_t out_numel;
  int64_t dims[kMaxDims];
  int64_t in_splits[kMaxSplitRanks];   // elements sent to each rank
  int64_t out_splits[kMaxSplitRanks];  // elements received from each rank
};

Signature make_signature(Op op, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);

// "all_reduce SUM float32[4, 256]" (for messages and reports).
std::string describe(const Signature& s);

// Why rank `their_rank`'s call `theirs` cannot run together with `mine`; empty if it can.
std::string incompatibility(const Signature& mine, int my_rank, const Signature& theirs, int their_rank);

enum class EntryState : uint8_t { kEmpty = 0, kWaiting, kRunning, kCompleted, kFailed };

struct Entry {
  std::atomic<uint64_t> seq;
  Signature sig;
  std::atomic<int64_t> posted_ns;
  std::atomic<int64_t> done_ns;
  std::atomic<uint8_t> state;
};

// A rank's view of one peer, for errors and reports.
struct PeerFacts {
  int rank;
  int pid;
  bool alive;
  int status;  // SlotStatus
  uint64_t posted;
  std::string failure;
};

// kLeft: destroy_process_group (or abort); kExited: the group went away with its process
// without that (an uncaught exception, sys.exit); a rank that dies stays kActive.
enum SlotStatus : int32_t { kNotJoined = 0, kActive = 1, kLeft = 2, kFailed = 3, kExited = 4 };

class Board {
 public:
  // Shared board of a group whose ranks all run on this host (rank 0 creates, others attach).
  static std::shared_ptr<Board> create_shared(const std::string& name, int world, int rank, const std::string& group);
  static std::shared_ptr<Board> attach_shared(const std::string& name, int world, int rank);
  // Board holding only this rank's slot (ranks on several hosts).
  static std::shared_ptr<Board> create_private(int world, int rank, const std::string& group);
  ~Board();

  // Removes the shared-memory name once every rank has attached (the mapping stays).
  void unlink_name();

  bool shared() const { return shared_; }
  int world() const { return world_; }
  int rank() const { return rank_; }
  void set_group(const std::string& group, const std::vector<uint64_t>& global_ranks);
  const std::string& group() const { return group_; }

  // ---- collectives -------------------------------------------------------------
  // Posts this rank's next collective; returns its sequence number.
  uint64_t post(const Signature& sig);
  // Compares this rank's collective `seq` with every peer that has posted it; returns why they
  // cannot run together (empty if they can). With `all` (a barrier) it first waits until
  // every peer has posted `seq`; otherwise it waits only when a peer lags so far behind that
  // the board would lose the entries it needs. Throws a DistBackendError with a report when
  // a peer it waits for is gone or the timeout expires.
  std::string await_peers(uint64_t seq, std::chrono::milliseconds timeout, double dump_after_s, bool all);
  void set_state(uint64_t seq, EntryState state);
  uint64_t last_posted() const;

  // ---- point to point (tag 0) ---------------------------------------------------
  void post_send(int dst, const Signature& sig);
  enum class SendCheck { kNotYet, kMatch, kUnknown, kMismatch };
  // Compares the `n`-th send of `src` to this rank with the receive `mine`, without waiting
  // (kUnknown: that send's record was overwritten by later ones). Sets `why` on a mismatch.
  SendCheck check_send(int src, uint64_t n, const Signature& mine, std::string* why) const;
  bool p2p_checked() const { return shared_ && p2p_peers_ > 0; }
  // For threads that wait on the board: the change counter, and a bounded wait for it to move.
  uint32_t changes() const;
  void wait_for_change(uint32_t seen, int64_t timeout_ns) const;
  void notify() { bump(); }
  // How this rank's collectives met their peers: all had arrived already, they arrived
  // while it polled, or it slept until they did (the costly case), and the time asleep.
  struct ArrivalStats {
    uint64_t immediate = 0;
    uint64_t polled = 0;
    uint64_t slept = 0;
    int64_t slept_ns = 0;
  };
  ArrivalStats arrival_stats() const { return stats_; }

  // ---- state of the ranks -------------------------------------------------------
  void leave();                           // destroy_process_group: this rank is gone
  void exit_without_destroy();            // the group is destroyed without destroy_process_group
  void fail(const std::string& reason);   // this rank gave up on the group
  // The first peer (other than this rank) that has left, failed or died, among `ranks`
  // (all peers when empty), described in a sentence; empty if none.
  std::string first_gone_peer(const std::vector<int>& ranks = {}) const;
  // Peers that have not completed collective `seq`; those that have not even posted it.
  std::vector<int> unfinished_peers(uint64_t seq) const;
  std::vector<int> absent_peers(uint64_t seq) const;

  // The report printed by timeout errors and the on-demand dump.
  std::string report(const std::string& headline, uint64_t focus_seq) const;
  // Structured view for Python: per rank, the slot facts and the recent entries.
  struct EntryView {
    uint64_t seq;
    std::string op;
    std::string description;
    std::string state;
    double age_s;
    double duration_ms;  // < 0 while not finished
  };
  struct RankView {
    int rank;
    int global_rank;
    int pid;
    bool alive;
    bool visible;  // false for ranks on other hosts
    std::string status;
    uint64_t posted;
    double waiting_s;  // >= 0 while blocked waiting for peers
    std::string failure;
    std::vector<EntryView> entries;
  };
  std::vector<RankView> snapshot() const;

 private:
  Board() = default;
  struct Header;
  struct SlotHeader;
  struct P2PEntry;
  void init_layout(int world);
  Header* header() const;
  SlotHeader* slot(int r) const;
  Entry* ring(int r) const;
  std::atomic<uint64_t>* send_counts(int r) const;
  P2PEntry* send_entry(int r, int dst, uint64_t n) const;
  PeerFacts facts(int r) const;
  bool visible(int r) const { return shared_ || r == rank_; }
  void bump();
  std::string entry_line(const Entry& e, int64_t now) const;

  bool shared_ = false;
  bool owns_name_ = false;
  std::string name_;
  int world_ = 0;
  int rank_ = 0;
  int p2p_peers_ = 0;
  size_t slot_bytes_ = 0;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  std::string group_;
  std::vector<uint64_t> global_ranks_;
  ArrivalStats stats_;
};

// Milliseconds since an arbitrary epoch shared by all processes of the host.
int64_t now_ns();
bool process_alive(int pid);

}  // namespace torch_npu::hccl
