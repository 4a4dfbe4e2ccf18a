// The collective board of an hccl process group (see hccl_board.h for why it exists).
#include "torch_npu/csrc/distributed/hccl_board.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <sstream>
#include <string_view>
#include <thread>

namespace torch_npu::hccl {

namespace {

constexpr uint64_t kMagic = 0x6863636c426f6172ULL;  // "hcclBoar"
constexpr uint32_t kVersion = 1;
constexpr int kRing = 16;       // recent collectives kept per rank
constexpr int kP2PRing = 8;     // recent sends kept per destination
constexpr int kReportEntries = 6;
constexpr int64_t kSliceNs = 50'000'000;  // liveness checks while waiting
constexpr int64_t kPollNs = 20'000;       // polling before sleeping on the futex

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

const char* reduce_name(uint8_t op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "?";
  }
}

bool is_reducing(Op op) {
  switch (op) {
    case Op::kAllReduce:
    case Op::kAllReduceCoalesced:
    case Op::kReduce:
    case Op::kReduceScatter:
    case Op::kReduceScatterTensor:
    case Op::kReduceScatterTensorCoalesced:
      return true;
    default:
      return false;
  }
}

bool is_rooted(Op op) {
  return op == Op::kBroadcast || op == Op::kReduce || op == Op::kGather || op == Op::kScatter;
}

std::string dtype_name(int8_t dtype) {
  if (dtype < 0 || dtype >= static_cast<int8_t>(c10::ScalarType::NumOptions)) return "none";
  // The torch.float32 spelling users see, not ATen's "Float".
  return std::string(c10::getDtypeNames(static_cast<c10::ScalarType>(dtype)).first);
}

std::string shape_text(const Signature& s) {
  std::ostringstream o;
  o << dtype_name(s.dtype) << "[";
  int nd = std::min<int>(s.ndim, kMaxDims);
  for (int i = 0; i < nd; ++i) o << (i ? ", " : "") << s.dims[i];
  o << "]";
  if (s.ntensors > 1) o << " x" << s.ntensors << " tensors";
  return o.str();
}

// Durations for messages: "3.00 s", "0.36 ms".
std::string seconds_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", ns / 1e9);
  return buf;
}

std::string millis_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f ms", ns / 1e6);
  return buf;
}

std::string elements_text(int64_t n) { return c10::str(n, n == 1 ? " element" : " elements"); }

void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts;
  ts.tv_sec = timeout_ns / 1'000'000'000;
  ts.tv_nsec = timeout_ns % 1'000'000'000;
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

[[noreturn]] void throw_dist_error(const std::string& msg) {
  throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllReduce: return "all_reduce";
    case Op::kAllReduceCoalesced: return "all_reduce_coalesced";
    case Op::kBroadcast: return "broadcast";
    case Op::kReduce: return "reduce";
    case Op::kAllGather: return "all_gather";
    case Op::kAllGatherIntoTensor: return "all_gather_into_tensor";
    case Op::kAllGatherCoalesced: return "all_gather_coalesced";
    case Op::kAllGatherIntoTensorCoalesced: return "all_gather_into_tensor_coalesced";
    case Op::kGather: return "gather";
    case Op::kScatter: return "scatter";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kReduceScatterTensor: return "reduce_scatter_tensor";
    case Op::kReduceScatterTensorCoalesced: return "reduce_scatter_tensor_coalesced";
    case Op::kAllToAllSingle: return "all_to_all_single";
    case Op::kAllToAll: return "all_to_all";
    case Op::kBarrier: return "barrier";
    case Op::kSend: return "send";
    case Op::kRecv: return "recv";
    default: return "?";
  }
}

bool is_point_to_point(Op op) { return op == Op::kSend || op == Op::kRecv; }

int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  // kill(pid, 0) also succeeds for a zombie, which is dead for our purpose: read the state.
  // Plain read(2), not a stream: a process that exits between the open and the read makes
  // the read fail (ESRCH), which libstdc++'s filebuf reports by throwing whatever the
  // stream's exception mask, out of this noexcept-in-practice check.
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;  // gone between the open and the read
  const std::string_view content(buffer, static_cast<size_t>(n));
  const auto name_end = content.rfind(')');
  if (name_end == std::string_view::npos || name_end + 2 >= content.size()) return true;
  const char state = content[name_end + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

Signature make_signature(Op op, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  Signature s;
  std::memset(&s, 0, sizeof(s));
  s.op = static_cast<uint8_t>(op);
  s.dtype = -1;
  s.root = -1;
  s.peer = -1;
  const at::Tensor* first = nullptr;
  for (const auto& t : inputs) {
    if (!t.defined()) continue;
    if (first == nullptr) first = &t;
    s.in_numel += t.numel();
  }
  for (const auto& t : outputs) {
    if (!t.defined()) continue;
    if (first == nullptr) first = &t;
    s.out_numel += t.numel();
  }
  s.ntensors = static_cast<int32_t>(inputs.empty() ? outputs.size() : inputs.size());
  if (first != nullptr) {
    s.dtype = static_cast<int8_t>(first->scalar_type());
    s.ndim = static_cast<uint8_t>(std::min<int64_t>(first->dim(), kMaxDims));
    for (int i = 0; i < s.ndim; ++i) s.dims[i] = first->size(i);
  }
  return s;
}

std::string describe(const Signature& s) {
  std::ostringstream o;
  Op op = static_cast<Op>(s.op);
  o << op_name(op);
  if (is_reducing(op)) o << " " << reduce_name(s.reduce_op);
  if (op != Op::kBarrier) o << " " << shape_text(s);
  if (is_rooted(op)) o << " root=" << s.root;
  if (op == Op::kSend) o << " to=" << s.peer;
  if (op == Op::kRecv) o << " from=" << s.peer;
  if (s.nsplits > 0) {
    o << " splits(in)=[";
    for (int i = 0; i < s.nsplits; ++i) o << (i ? ", " : "") << s.in_splits[i];
    o << "]";
  }
  return o.str();
}

std::string incompatibility(const Signature& mine, int my_rank, const Signature& theirs, int their_rank) {
  const Op op = static_cast<Op>(mine.op);
  auto both = [&](const std::string& what, const std::string& a, const std::string& b) {
    return c10::str(what, ": rank ", my_rank, " passed ", a, " but rank ", their_rank, " passed ", b);
  };
  if (mine.op != theirs.op) {
    return c10::str("the ranks called different collectives at the same point: rank ", my_rank, " called ",
                    describe(mine), ", rank ", their_rank, " called ", describe(theirs),
                    ". Every rank of a group must issue the same collectives in the same order");
  }
  if (op == Op::kBarrier) return "";
  if (is_rooted(op) && mine.root != theirs.root) {
    return both(c10::str(op_name(op), " root"), c10::str("root=", mine.root), c10::str("root=", theirs.root)) +
           ". Every rank must name the same root";
  }
  if (is_reducing(op) && mine.reduce_op != theirs.reduce_op) {
    return both(c10::str(op_name(op), " reduce op"), reduce_name(mine.reduce_op), reduce_name(theirs.reduce_op)) +
           ". Every rank must use the same ReduceOp";
  }
  if (mine.dtype >= 0 && theirs.dtype >= 0 && mine.dtype != theirs.dtype) {
    return both(c10::str(op_name(op), " dtype"), shape_text(mine), shape_text(theirs)) +
           ". Every rank must pass tensors of the same dtype";
  }
  auto count_mismatch = [&](const char* which, int64_t a, int64_t b) {
    return both(c10::str(op_name(op), " ", which, " size"), c10::str(shape_text(mine), " (", elements_text(a), ")"),
                c10::str(shape_text(theirs), " (", elements_text(b), ")")) +
           ". Every rank must pass tensors with the same number of elements";
  };
  switch (op) {
    case Op::kAllToAllSingle:
    case Op::kAllToAll:
      if (mine.nsplits > 0 && theirs.nsplits > 0 && my_rank < kMaxSplitRanks && their_rank < kMaxSplitRanks) {
        if (mine.in_splits[their_rank] != theirs.out_splits[my_rank]) {
          return c10::str(op_name(op), " split sizes: rank ", my_rank, " sends ",
                          elements_text(mine.in_splits[their_rank]), " to rank ", their_rank, ", which expects ",
                          elements_text(theirs.out_splits[my_rank]), " from it. input_split_sizes of the sender "
                          "must match output_split_sizes of the receiver");
        }
        if (mine.out_splits[their_rank] != theirs.in_splits[my_rank]) {
          return c10::str(op_name(op), " split sizes: rank ", their_rank, " sends ",
                          elements_text(theirs.in_splits[my_rank]), " to rank ", my_rank, ", which expects ",
                          elements_text(mine.out_splits[their_rank]), " from it. input_split_sizes of the sender "
                          "must match output_split_sizes of the receiver");
        }
        return "";
      }
      if (mine.in_numel != theirs.in_numel) return count_mismatch("input", mine.in_numel, theirs.in_numel);
      if (mine.out_numel != theirs.out_numel) return count_mismatch("output", mine.out_numel, theirs.out_numel);
      return "";
    case Op::kGather:
      if (mine.in_numel != theirs.in_numel) return count_mismatch("input", mine.in_numel, theirs.in_numel);
      return "";
    case Op::kScatter:
      if (mine.out_numel != theirs.out_numel) return count_mismatch("output", mine.out_numel, theirs.out_numel);
      return "";
    case Op::kAllReduceCoalesced:
    case Op::kAllGatherCoalesced:
    case Op::kAllGatherIntoTensorCoalesced:
    case Op::kReduceScatterTensorCoalesced:
      if (mine.ntensors != theirs.ntensors) {
        return both(c10::str(op_name(op), " tensor count"), c10::str(mine.ntensors, " tensors"),
                    c10::str(theirs.ntensors, " tensors"));
      }
      [[fallthrough]];
    default:
      if (mine.in_numel != theirs.in_numel) return count_mismatch("input", mine.in_numel, theirs.in_numel);
      if (mine.out_numel != theirs.out_numel) return count_mismatch("output", mine.out_numel, theirs.out_numel);
      return "";
  }
}

// ---- layout ------------------------------------------------------------------------

struct Board::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  uint32_t p2p_peers;
  uint32_t pad;
  uint64_t slot_bytes;
  std::atomic<uint32_t> wake;     // bumped on every change a waiter may wait for
  std::atomic<uint32_t> waiters;  // ranks blocked on `wake`
  char group[128];
};

struct alignas(64) Board::SlotHeader {
  std::atomic<uint64_t> posted;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> status;
  std::atomic<int64_t> waiting_since_ns;
  std::atomic<uint64_t> waiting_seq;
  int32_t global_rank;
  char failure[320];
};

struct Board::P2PEntry {
  std::atomic<uint64_t> n;
  Signature sig;
};

void Board::init_layout(int world) {
  world_ = world;
  p2p_peers_ = world <= kMaxSplitRanks ? world : 0;
  slot_bytes_ = align64(sizeof(SlotHeader)) + align64(sizeof(Entry) * kRing) +
                align64(sizeof(std::atomic<uint64_t>) * p2p_peers_) + align64(sizeof(P2PEntry) * p2p_peers_ * kP2PRing);
  bytes_ = align64(sizeof(Header)) + slot_bytes_ * world;
}

Board::Header* Board::header() const { return static_cast<Header*>(base_); }

Board::SlotHeader* Board::slot(int r) const {
  return reinterpret_cast<SlotHeader*>(static_cast<char*>(base_) + align64(sizeof(Header)) + slot_bytes_ * r);
}

Entry* Board::ring(int r) const {
  return reinterpret_cast<Entry*>(reinterpret_cast<char*>(slot(r)) + align64(sizeof(SlotHeader)));
}

std::atomic<uint64_t>* Board::send_counts(int r) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(ring(r)) + align64(sizeof(Entry) * kRing));
}

Board::P2PEntry* Board::send_entry(int r, int dst, uint64_t n) const {
  auto* base = reinterpret_cast<P2PEntry*>(reinterpret_cast<char*>(send_counts(r)) +
                                           align64(sizeof(std::atomic<uint64_t>) * p2p_peers_));
  return base + dst * kP2PRing + (n % kP2PRing);
}

std::shared_ptr<Board> Board::create_shared(const std::string& name, int world, int rank, const std::string& group) {
  TORCH_CHECK(world > 0 && rank >= 0 && rank < world, "invalid rank ", rank, " of ", world);
  std::shared_ptr<Board> b(new Board());
  b->init_layout(world);
  b->shared_ = true;
  b->name_ = name;
  b->rank_ = rank;
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  TORCH_CHECK(fd >= 0, "hccl: cannot create the shared collective board ", name, ": ", std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(b->bytes_)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    TORCH_CHECK(false, "hccl: cannot size the shared collective board ", name, ": ", std::strerror(err));
  }
  void* p = mmap(nullptr, b->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    TORCH_CHECK(false, "hccl: cannot map the shared collective board ", name, ": ", std::strerror(errno));
  }
  b->base_ = p;
  b->owns_name_ = true;
  std::memset(p, 0, b->bytes_);  // ftruncate zero-fills already; be explicit about the initial state
  Header* h = b->header();
  h->world = static_cast<uint32_t>(world);
  h->p2p_peers = static_cast<uint32_t>(b->p2p_peers_);
  h->slot_bytes = b->slot_bytes_;
  std::snprintf(h->group, sizeof(h->group), "%s", group.c_str());
  h->version = kVersion;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  b->group_ = group;
  b->slot(rank)->pid.store(getpid());
  b->slot(rank)->status.store(kActive);
  return b;
}

std::shared_ptr<Board> Board::attach_shared(const std::string& name, int world, int rank) {
  TORCH_CHECK(world > 0 && rank >= 0 && rank < world, "invalid rank ", rank, " of ", world);
  std::shared_ptr<Board> b(new Board());
  b->init_layout(world);
  b->shared_ = true;
  b->name_ = name;
  b->rank_ = rank;
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  TORCH_CHECK(fd >= 0, "hccl: cannot open the shared collective board ", name, " created by rank 0: ",
              std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < b->bytes_) {
    close(fd);
    TORCH_CHECK(false, "hccl: the collective board ", name, " has an unexpected size; do all ranks run the same "
                "torch_npu version and world size?");
  }
  void* p = mmap(nullptr, b->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  TORCH_CHECK(p != MAP_FAILED, "hccl: cannot map the shared collective board ", name, ": ", std::strerror(errno));
  b->base_ = p;
  Header* h = b->header();
  TORCH_CHECK(h->magic == kMagic && h->version == kVersion && h->world == static_cast<uint32_t>(world),
              "hccl: the collective board ", name, " does not match this group (world ", world,
              "); do all ranks run the same torch_npu version?");
  b->group_ = h->group;
  b->slot(rank)->pid.store(getpid());
  b->slot(rank)->status.store(kActive);
  return b;
}

std::shared_ptr<Board> Board::create_private(int world, int rank, const std::string& group) {
  TORCH_CHECK(world > 0 && rank >= 0 && rank < world, "invalid rank ", rank, " of ", world);
  std::shared_ptr<Board> b(new Board());
  b->init_layout(world);
  b->shared_ = false;
  b->rank_ = rank;
  void* p = mmap(nullptr, b->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(p != MAP_FAILED, "hccl: cannot allocate the collective board: ", std::strerror(errno));
  b->base_ = p;
  Header* h = b->header();
  h->magic = kMagic;
  h->version = kVersion;
  h->world = static_cast<uint32_t>(world);
  h->slot_bytes = b->slot_bytes_;
  std::snprintf(h->group, sizeof(h->group), "%s", group.c_str());
  b->group_ = group;
  b->slot(rank)->pid.store(getpid());
  b->slot(rank)->status.store(kActive);
  return b;
}

Board::~Board() {
  if (base_ != nullptr) {
    SlotHeader* me = slot(rank_);
    int32_t st = me->status.load();
    if (st == kActive) me->status.store(kExited);
    bump();
    munmap(base_, bytes_);
  }
  if (owns_name_) shm_unlink(name_.c_str());
}

void Board::unlink_name() {
  if (owns_name_) {
    shm_unlink(name_.c_str());
    owns_name_ = false;
  }
}

void Board::set_group(const std::string& group, const std::vector<uint64_t>& global_ranks) {
  group_ = group;
  global_ranks_ = global_ranks;
  if (rank_ < static_cast<int>(global_ranks.size())) slot(rank_)->global_rank = static_cast<int32_t>(global_ranks[rank_]);
  else slot(rank_)->global_rank = rank_;
}

void Board::bump() {
  Header* h = header();
  h->wake.fetch_add(1);
  if (h->waiters.load() > 0) futex_wake_all(&h->wake);
}

void Board::wait_for_change(uint32_t seen, int64_t timeout_ns) const {
  Header* h = header();
  h->waiters.fetch_add(1);
  if (h->wake.load() == seen) futex_wait(&h->wake, seen, timeout_ns);
  h->waiters.fetch_sub(1);
}

uint64_t Board::last_posted() const { return slot(rank_)->posted.load(); }

uint64_t Board::post(const Signature& sig) {
  SlotHeader* me = slot(rank_);
  uint64_t seq = me->posted.load(std::memory_order_relaxed) + 1;
  Entry& e = ring(rank_)[seq % kRing];
  e.state.store(static_cast<uint8_t>(EntryState::kEmpty));
  e.seq.store(seq);
  e.sig = sig;
  e.posted_ns.store(now_ns());
  e.done_ns.store(0);
  e.state.store(static_cast<uint8_t>(EntryState::kWaiting));
  // Sequentially consistent, as the loads of the peers' counters in await_peers: of two
  // ranks that post at the same moment, at least one sees the other's entry and compares
  // (with a release store both could miss each other and enter the transport unchecked).
  me->posted.store(seq);
  bump();
  return seq;
}

void Board::set_state(uint64_t seq, EntryState state) {
  Entry& e = ring(rank_)[seq % kRing];
  if (e.seq.load() != seq) return;
  if (state == EntryState::kCompleted || state == EntryState::kFailed) e.done_ns.store(now_ns());
  e.state.store(static_cast<uint8_t>(state));
  if (state != EntryState::kRunning) bump();
}

PeerFacts Board::facts(int r) const {
  SlotHeader* s = slot(r);
  PeerFacts f;
  f.rank = r;
  f.pid = s->pid.load();
  f.status = s->status.load();
  f.alive = visible(r) && f.status != kNotJoined ? process_alive(f.pid) : true;
  f.posted = s->posted.load();
  if (f.status == kFailed) f.failure = std::string(s->failure, strnlen(s->failure, sizeof(s->failure)));
  return f;
}

std::string Board::first_gone_peer(const std::vector<int>& ranks) const {
  if (!shared_) return "";
  auto check = [&](int r) -> std::string {
    if (r == rank_) return "";
    PeerFacts f = facts(r);
    if (f.status == kLeft) return c10::str("rank ", r, " (pid ", f.pid, ") left the group (destroy_process_group)");
    if (f.status == kExited) {
      return c10::str("rank ", r, " (pid ", f.pid, ") has exited without destroy_process_group (its process "
                      "ended, e.g. on an uncaught exception: see that rank's output)");
    }
    if (f.status == kFailed) return c10::str("rank ", r, " (pid ", f.pid, ") gave up on the group: ", f.failure);
    if (f.status == kActive && !f.alive) {
      return c10::str("rank ", r, " (pid ", f.pid, ") has exited without leaving the group: it died (killed by a "
                      "signal, crashed, or os._exit)");
    }
    return "";
  };
  if (ranks.empty()) {
    for (int r = 0; r < world_; ++r) {
      auto s = check(r);
      if (!s.empty()) return s;
    }
  } else {
    for (int r : ranks) {
      auto s = check(r);
      if (!s.empty()) return s;
    }
  }
  return "";
}

std::vector<int> Board::unfinished_peers(uint64_t seq) const {
  std::vector<int> out;
  if (!shared_) return out;
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    SlotHeader* s = slot(r);
    if (s->posted.load() < seq) {
      out.push_back(r);
      continue;
    }
    const Entry& e = ring(r)[seq % kRing];
    if (e.seq.load() == seq && e.state.load() != static_cast<uint8_t>(EntryState::kCompleted)) out.push_back(r);
  }
  return out;
}

std::vector<int> Board::absent_peers(uint64_t seq) const {
  std::vector<int> out;
  if (!shared_) return out;
  for (int r = 0; r < world_; ++r) {
    if (r != rank_ && slot(r)->posted.load() < seq) out.push_back(r);
  }
  return out;
}

std::string Board::await_peers(uint64_t seq, std::chrono::milliseconds timeout, double dump_after_s, bool all) {
  const Entry& mine_entry = ring(rank_)[seq % kRing];
  const Signature& mine = mine_entry.sig;
  const Op op = static_cast<Op>(mine.op);
  if (!shared_ || world_ == 1) return "";
  SlotHeader* me = slot(rank_);
  const int64_t start = now_ns();
  const int64_t deadline = start + static_cast<int64_t>(timeout.count()) * 1'000'000;
  bool dumped = false;
  bool waiting_marked = false;
  int64_t last_check = start;
  bool polled = false;
  bool slept = false;
  // Without `all`, a rank waits only so far that no peer falls kRing collectives behind
  // (the board must still hold the entry a late peer compares against).
  const uint64_t target = all ? seq : (seq > kRing - 2 ? seq - (kRing - 2) : 0);
  std::vector<int> missing;
  for (int r = 0; r < world_; ++r) missing.push_back(r);
  auto clear_wait = [&]() {
    if (waiting_marked) {
      me->waiting_since_ns.store(0);
      waiting_marked = false;
    }
  };
  while (true) {
    uint32_t seen = header()->wake.load();
    std::vector<int> still;
    for (int r : missing) {
      if (r == rank_) continue;
      if (slot(r)->posted.load() < target) still.push_back(r);
    }
    missing.swap(still);
    if (missing.empty()) {
      if (slept) {
        ++stats_.slept;
        stats_.slept_ns += now_ns() - start;
      } else if (polled) {
        ++stats_.polled;
      } else {
        ++stats_.immediate;
      }
      break;
    }
    int64_t now = now_ns();
    // Arrival gaps in steady loops are microseconds: poll briefly before sleeping. No
    // sched_yield here: on a loaded host it hands the core away for a whole time slice.
    if (now - start < kPollNs) {
      polled = true;
      cpu_relax();
      continue;
    }
    // A peer that is gone will never arrive (checked once per sleep slice: it reads /proc).
    if (now - last_check >= kSliceNs) {
      last_check = now;
      std::string gone = first_gone_peer(missing);
      if (!gone.empty()) {
        clear_wait();
        std::string head = c10::str("hccl ", describe(mine), " (#", seq, " on group '", group_,
                                    "') cannot complete: ", gone, " before joining it");
        throw_dist_error(report(head, seq));
      }
    }
    if (now >= deadline) {
      clear_wait();
      std::ostringstream who;
      for (size_t i = 0; i < missing.size(); ++i) who << (i ? ", " : "") << missing[i];
      std::string head = c10::str(
          "hccl ", describe(mine), " (#", seq, " on group '", group_, "') timed out after ",
          seconds_text(timeout.count() * 1'000'000), " on rank ", rank_, ": rank", missing.size() > 1 ? "s " : " ", who.str(),
          " did not arrive. The timeout comes from init_process_group(timeout=...) or, when that is not given, "
          "HCCL_EXEC_TIMEOUT (seconds)");
      throw_dist_error(report(head, seq));
    }
    if (dump_after_s > 0 && !dumped && (now - start) > static_cast<int64_t>(dump_after_s * 1e9)) {
      dumped = true;
      std::cerr << report(c10::str("hccl: rank ", rank_, " has waited ", seconds_text(now - start), " in ",
                                   describe(mine), " (#", seq, " on group '", group_, "')"),
                          seq)
                << std::endl;
    }
    if (!waiting_marked) {
      me->waiting_seq.store(seq);
      me->waiting_since_ns.store(start);
      waiting_marked = true;
    }
    slept = true;
    wait_for_change(seen, std::max<int64_t>(1'000'000, std::min(kSliceNs, deadline - now)));
  }
  clear_wait();
  // Compare with every peer that has posted this collective. A pair of ranks exchanges data
  // only if both entered the transport, and the later of the two compared them first: a
  // mismatched call never reaches the transport on both sides (where a receive buffer too
  // small for the message would abort the process, and a wrong dtype would give garbage).
  // A peer that posted this collective and then gave up (its own timeout, an error) will
  // not run it: say so instead of entering the transport.
  for (int r = 0; r < world_; ++r) {
    if (r == rank_ || slot(r)->posted.load() < seq) continue;
    int32_t st = slot(r)->status.load();
    const Entry& theirs = ring(r)[seq % kRing];
    bool done_with_it = theirs.seq.load() == seq &&
                        theirs.state.load() == static_cast<uint8_t>(EntryState::kCompleted);
    if ((st == kFailed || st == kLeft || st == kExited) && !done_with_it) {
      std::string head = c10::str("hccl ", describe(mine), " (#", seq, " on group '", group_, "') cannot complete: ",
                                  first_gone_peer({r}));
      throw_dist_error(report(head, seq));
    }
  }
  for (int r = 0; r < world_; ++r) {
    if (r == rank_ || slot(r)->posted.load() < seq) continue;
    const Entry& e = ring(r)[seq % kRing];
    if (e.seq.load(std::memory_order_acquire) != seq) continue;  // cannot happen: the run-ahead is bounded
    std::string why = incompatibility(mine, rank_, e.sig, r);
    if (!why.empty()) {
      return c10::str("hccl ", op_name(op), " (#", seq, " on group '", group_, "'): ", why,
                      ". This rank did not enter the transport");
    }
  }
  return "";
}

void Board::post_send(int dst, const Signature& sig) {
  if (p2p_peers_ == 0 || dst < 0 || dst >= p2p_peers_) return;
  std::atomic<uint64_t>& count = send_counts(rank_)[dst];
  uint64_t n = count.load(std::memory_order_relaxed) + 1;
  P2PEntry* e = send_entry(rank_, dst, n);
  e->n.store(0);
  e->sig = sig;
  e->n.store(n);
  count.store(n, std::memory_order_release);
  bump();
}

uint32_t Board::changes() const { return header()->wake.load(); }

Board::SendCheck Board::check_send(int src, uint64_t n, const Signature& mine, std::string* why) const {
  if (!p2p_checked() || src < 0 || src >= p2p_peers_) return SendCheck::kUnknown;
  if (send_counts(src)[rank_].load(std::memory_order_acquire) < n) return SendCheck::kNotYet;
  P2PEntry* e = send_entry(src, rank_, n);
  if (e->n.load(std::memory_order_acquire) != n) return SendCheck::kUnknown;
  const Signature& sent = e->sig;
  if (sent.dtype == mine.dtype && sent.in_numel == mine.out_numel) return SendCheck::kMatch;
  *why = c10::str("hccl recv on group '", group_, "': rank ", src, " sent ", shape_text(sent), " (",
                  elements_text(sent.in_numel), ") but rank ", rank_, " receives into ", shape_text(mine), " (",
                  elements_text(mine.out_numel), "). The receive buffer must have the dtype and number of "
                  "elements of the sent tensor");
  return SendCheck::kMismatch;
}

void Board::leave() {
  SlotHeader* me = slot(rank_);
  if (me->status.load() == kActive) me->status.store(kLeft);
  bump();
}

void Board::exit_without_destroy() {
  SlotHeader* me = slot(rank_);
  if (me->status.load() == kActive) me->status.store(kExited);
  bump();
}

void Board::fail(const std::string& reason) {
  SlotHeader* me = slot(rank_);
  if (me->status.load() != kActive) return;
  std::snprintf(me->failure, sizeof(me->failure), "%s", reason.c_str());
  me->status.store(kFailed);
  bump();
}

std::string Board::entry_line(const Entry& e, int64_t now) const {
  uint64_t seq = e.seq.load();
  auto state = static_cast<EntryState>(e.state.load());
  int64_t posted = e.posted_ns.load();
  int64_t done = e.done_ns.load();
  std::ostringstream o;
  o << "#" << seq << " " << describe(e.sig);
  switch (state) {
    case EntryState::kWaiting:
      o << "  [waiting for peers " << seconds_text(now - posted) << "]";
      break;
    case EntryState::kRunning:
      o << "  [in flight " << seconds_text(now - posted) << "]";
      break;
    case EntryState::kCompleted:
      o << "  [completed in " << millis_text(done - posted) << ", " << seconds_text(now - done) << " ago]";
      break;
    case EntryState::kFailed:
      o << "  [failed]";
      break;
    default:
      o << "  [?]";
  }
  return o.str();
}

std::string Board::report(const std::string& headline, uint64_t focus_seq) const {
  const int64_t now = now_ns();
  if (focus_seq == 0) {  // on demand: the newest collective any rank has reached
    for (int r = 0; r < world_; ++r) {
      if (visible(r)) focus_seq = std::max<uint64_t>(focus_seq, slot(r)->posted.load());
    }
  }
  std::ostringstream o;
  o << headline << "\n";
  o << "Collective status of group '" << group_ << "' (" << world_ << " ranks";
  if (!global_ranks_.empty()) {
    o << ", global ranks [";
    for (size_t i = 0; i < global_ranks_.size(); ++i) o << (i ? ", " : "") << global_ranks_[i];
    o << "]";
  }
  o << "), seen by rank " << rank_ << ":\n";
  for (int r = 0; r < world_; ++r) {
    o << "  rank " << r;
    if (!visible(r)) {
      o << ": on another host, no status\n";
      continue;
    }
    PeerFacts f = facts(r);
    o << " (pid " << f.pid << "): ";
    if (f.status == kNotJoined) {
      o << "never joined\n";
      continue;
    }
    if (f.status == kLeft) o << "left the group (destroy_process_group); ";
    if (f.status == kExited) o << "EXITED without destroy_process_group; ";
    if (f.status == kFailed) o << "gave up on the group (" << f.failure << "); ";
    if (f.status == kActive && !f.alive) o << "PROCESS DIED; ";
    SlotHeader* s = slot(r);
    int64_t since = s->waiting_since_ns.load();
    if (since != 0) o << "waiting for peers in #" << s->waiting_seq.load() << " for " << seconds_text(now - since) << "; ";
    o << "last posted #" << f.posted;
    if (focus_seq > 0 && f.posted < focus_seq) o << "  <-- has not arrived at #" << focus_seq;
    o << "\n";
  }
  o << "Last collectives of each rank (oldest first):";
  for (int r = 0; r < world_; ++r) {
    if (!visible(r)) continue;
    uint64_t posted = slot(r)->posted.load();
    o << "\n  rank " << r << ":";
    if (posted == 0) {
      o << " none";
      continue;
    }
    uint64_t first = posted > kReportEntries ? posted - kReportEntries + 1 : 1;
    for (uint64_t q = first; q <= posted; ++q) {
      const Entry& e = ring(r)[q % kRing];
      if (e.seq.load() != q) continue;
      o << "\n    " << entry_line(e, now);
    }
  }
  return o.str();
}

std::vector<Board::RankView> Board::snapshot() const {
  const int64_t now = now_ns();
  std::vector<RankView> out;
  for (int r = 0; r < world_; ++r) {
    RankView v;
    v.rank = r;
    v.visible = visible(r);
    SlotHeader* s = slot(r);
    v.global_rank = r < static_cast<int>(global_ranks_.size()) ? static_cast<int>(global_ranks_[r]) : r;
    v.pid = v.visible ? s->pid.load() : -1;
    PeerFacts f = facts(r);
    v.alive = v.visible ? f.alive : true;
    static const char* kStatus[] = {"not joined", "active", "left", "failed", "exited"};
    v.status = v.visible ? kStatus[std::clamp(f.status, 0, 4)] : "unknown";
    if (v.visible && f.status == kActive && !f.alive) v.status = "died";
    v.posted = v.visible ? f.posted : 0;
    int64_t since = v.visible ? s->waiting_since_ns.load() : 0;
    v.waiting_s = since != 0 ? (now - since) / 1e9 : -1.0;
    v.failure = f.failure;
    if (v.visible && v.posted > 0) {
      uint64_t first = v.posted > kRing ? v.posted - kRing + 1 : 1;
      for (uint64_t q = first; q <= v.posted; ++q) {
        const Entry& e = ring(r)[q % kRing];
        if (e.seq.load() != q) continue;
        EntryView ev;
        ev.seq = q;
        ev.op = op_name(static_cast<Op>(e.sig.op));
        ev.description = describe(e.sig);
        static const char* kState[] = {"empty", "waiting", "running", "completed", "failed"};
        ev.state = kState[std::min<int>(e.state.load(), 4)];
        int64_t posted = e.posted_ns.load();
        int64_t done = e.done_ns.load();
        ev.age_s = (now - posted) / 1e9;
        ev.duration_ms = done != 0 ? (done - posted) / 1e6 : -1.0;
        v.entries.push_back(ev);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace torch_npu::hccl
