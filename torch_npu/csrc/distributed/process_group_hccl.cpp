// ProcessGroupHCCL: c10d collectives on npu tensors over PyTorch's Gloo transport.
#include "torch_npu/csrc/distributed/process_group_hccl.h"

#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/env_settings.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <fstream>
#include <sstream>
#include <iostream>

namespace torch_npu::hccl {

namespace {

[[noreturn]] void throw_dist_error(const std::string& msg) {
  throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

std::exception_ptr dist_error(const std::string& msg) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
}

std::string what_of(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// The message of an error without the C++ stack a c10::Error carries.
std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return what_of(e);
  } catch (...) {
    return "unknown error";
  }
}

void check_npu(const at::Tensor& t, Op op, const char* role) {
  TORCH_CHECK(t.defined(), "hccl ", op_name(op), ": an undefined ", role, " tensor was passed");
  TORCH_CHECK(t.device().type() == kNpu, "hccl ", op_name(op), ": expected npu tensors, but the ", role,
              " tensor is on ", t.device(), ". Move it to npu with .to('npu'), or create the group with a "
              "backend for that device as well, e.g. init_process_group('cpu:gloo,npu:hccl')");
  TORCH_CHECK(t.layout() == at::kStrided, "hccl ", op_name(op), ": only dense (strided) npu tensors are supported, "
              "got layout ", t.layout());
  TORCH_CHECK(t.is_contiguous(t.suggest_memory_format()), "hccl ", op_name(op), ": the ", role,
              " tensor must be contiguous (non-overlapping and dense); call .contiguous() first");
}

void check_all(const std::vector<at::Tensor>& ts, Op op, const char* role) {
  for (const auto& t : ts) check_npu(t, op, role);
}

// A CPU tensor over the same bytes as the npu tensor `t` that keeps the npu storage alive
// for as long as the transport holds it (no copy).
at::Tensor host_view(const at::Tensor& t) {
  if (t.device().type() != kNpu) return t;
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  void* data = impl->mutable_data_ptr().get();
  auto* keep = new c10::Storage(t.storage());
  c10::DataPtr dp(data, keep, [](void* ctx) { delete static_cast<c10::Storage*>(ctx); }, c10::Device(c10::kCPU));
  c10::Storage host(c10::Storage::use_byte_size_t(), impl->nbytes(), std::move(dp), nullptr, /*resizable=*/false);
  auto ti = c10::make_intrusive<c10::TensorImpl>(std::move(host), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                 t.dtype());
  ti->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(ti));
}

std::vector<at::Tensor> host_views(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(host_view(t));
  return out;
}

std::vector<std::vector<at::Tensor>> host_views(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ls.size());
  for (const auto& l : ls) out.push_back(host_views(l));
  return out;
}

// The dtypes the transport (Gloo) handles itself. A data-movement collective of any other
// dtype (float8, uint16/32/64, int16) moves the tensor's bytes, as NCCL does; reductions of
// them are refused before anything is posted (reduction_dtype_check).
bool transport_has_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kChar: case at::kByte:
    case at::kBool: case at::kInt: case at::kLong: case at::kComplexFloat: case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// host_view() for a collective that only moves data: bytes when the transport lacks the
// dtype, keeping the leading dimensions (all_to_all splits count rows of dimension 0).
at::Tensor moved_view(const at::Tensor& t) {
  at::Tensor h = host_view(t);
  if (transport_has_dtype(h.scalar_type())) return h;
  if (h.dim() == 0) h = h.reshape({1});
  return h.view(at::kByte);
}

std::vector<at::Tensor> moved_views(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(moved_view(t));
  return out;
}

std::vector<std::vector<at::Tensor>> moved_views(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ls.size());
  for (const auto& l : ls) out.push_back(moved_views(l));
  return out;
}

bool widened_dtype(at::ScalarType t) { return t == at::kShort; }

void reduction_dtype_check(const std::vector<at::Tensor>& ts, Op op) {
  for (const auto& t : ts) {
    const auto type = t.scalar_type();
    const std::string dtype = "torch." + std::string(c10::getDtypeNames(type).first);
    // ProcessGroupNCCL's wording, so that code matching on it behaves the same.
    TORCH_CHECK(!at::isFloat8Type(type), "Float8 dtypes are not currenlty supported for HCCL reductions (hccl ",
                op_name(op), " of a ", dtype, " tensor); data-movement collectives (broadcast, all_gather, "
                "all_to_all, scatter, gather, send/recv) of float8 tensors are supported");
    // Neither NCCL's dtype table nor HCCL's has the wide unsigned types: ProcessGroupNCCL
    // refuses them ("Input tensor data type is not supported for NCCL process group").
    TORCH_CHECK(!(type == at::kUInt16 || type == at::kUInt32 || type == at::kUInt64), "hccl ", op_name(op),
                ": reductions of ", dtype, " tensors are not supported: neither NCCL nor HCCL has a reduction for ",
                dtype, " (ProcessGroupNCCL refuses it with 'Input tensor data type is not supported for NCCL "
                "process group'); cast the tensor to torch.int64 first (and back after). Data-movement collectives "
                "(broadcast, all_gather, all_to_all, scatter, gather, send/recv) of ", dtype, " tensors are supported");
    TORCH_CHECK(transport_has_dtype(type) || widened_dtype(type), "hccl ", op_name(op), ": reductions of ", dtype,
                " tensors are not supported on this backend (it reduces float32, float64, float16, bfloat16, int8, "
                "uint8, int16, int32, int64, bool and complex tensors); cast the tensor first. Data-movement "
                "collectives take any dtype");
  }
}

// Reductions of a dtype the transport lacks but HCCL has (int16) run on int64 copies, and
// the result is narrowed back. Narrowing keeps the low 16 bits, which is exactly int16's
// wrap-around arithmetic for SUM and PRODUCT (both modular), and exact for MIN, MAX and the
// bitwise ops (sign-extended operands). AVG divides after narrowing: the wrapped sum
// divided by the world size, as an int16 sum followed by a division gives.
at::Tensor widen(const at::Tensor& host) { return widened_dtype(host.scalar_type()) ? host.to(at::kLong) : host; }

std::vector<at::Tensor> widen(const std::vector<at::Tensor>& hosts) {
  std::vector<at::Tensor> out;
  out.reserve(hosts.size());
  for (const auto& h : hosts) out.push_back(widen(h));
  return out;
}

std::vector<std::vector<at::Tensor>> widen(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& l : lists) out.push_back(widen(l));
  return out;
}

// An int64 buffer the transport writes an int16 result into (out-of-place collectives).
at::Tensor widened_output(const at::Tensor& host) {
  return widened_dtype(host.scalar_type()) ? at::empty_like(host, host.options().dtype(at::kLong)) : host;
}

std::vector<at::Tensor> widened_outputs(const std::vector<at::Tensor>& hosts) {
  std::vector<at::Tensor> out;
  out.reserve(hosts.size());
  for (const auto& h : hosts) out.push_back(widened_output(h));
  return out;
}

bool any_staged(const std::vector<at::Tensor>& views, const std::vector<at::Tensor>& staged) {
  for (size_t i = 0; i < views.size(); ++i) {
    if (!views[i].is_same(staged[i])) return true;
  }
  return false;
}

// The staged result back into the tensor (a narrowing copy for int16).
void unstage(at::Tensor& view, const at::Tensor& staged) {
  if (!view.is_same(staged)) view.copy_(staged);
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<at::Tensor> out;
  for (const auto& l : ls) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// What Gloo runs for a ReduceOp, and what this backend adds before and after: Gloo has
// neither AVG nor PREMUL_SUM, which FSDP and DDP use on accelerators.
struct Reduction {
  c10d::ReduceOp transport = c10d::ReduceOp::SUM;
  bool average = false;
  bool premul = false;
  double factor = 1.0;
  at::Tensor factor_tensor;

  bool needs_staging() const { return premul; }
  void scale(at::Tensor& host) const {
    if (factor_tensor.defined()) host.mul_(factor_tensor);
    else host.mul_(factor);
  }
  void finish(at::Tensor& host, int size) const {
    if (!average) return;
    if (at::isFloatingType(host.scalar_type()) || at::isComplexType(host.scalar_type())) host.div_(size);
    else host.div_(size, "trunc");
  }
};

Reduction plan_reduction(const c10d::ReduceOp& op, Op what) {
  Reduction r;
  if (op.op_ == c10d::ReduceOp::AVG) {
    r.average = true;
  } else if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    r.premul = true;
    auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(sup != nullptr, "hccl ", op_name(what), ": PREMUL_SUM needs a factor; create the op with "
                "torch.distributed._make_nccl_premul_sum(factor)");
    if (sup->tensor_factor.defined()) r.factor_tensor = host_view(sup->tensor_factor);
    else r.factor = sup->double_factor;
  } else {
    r.transport = op;
  }
  return r;
}

std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds requested, const GroupState& s) {
  return requested == c10d::kUnsetTimeout || requested.count() <= 0 ? s.timeout : requested;
}

std::vector<c10::Device> devices_of(const std::vector<at::Tensor>& ts) {
  std::vector<c10::Device> out;
  for (const auto& t : ts) {
    if (!t.defined() || t.device().type() != kNpu) continue;
    if (std::find(out.begin(), out.end(), t.device()) == out.end()) out.push_back(t.device());
  }
  return out;
}

}  // namespace

// ---- group state ----------------------------------------------------------------------

void GroupState::mark_broken(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (broken.load()) return;
    broken_reason = reason;
    broken.store(true);
  }
  std::string first_line = reason.substr(0, reason.find('\n'));
  board->fail(first_line);
  // Any path prefix is accepted: a file that cannot be opened only loses the report.
  if (std::optional<std::string> prefix = env_settings::read("TORCH_HCCL_DEBUG_INFO_TEMP_FILE")) {
    std::ofstream f(*prefix + std::to_string(rank), std::ios::app);
    f << reason << "\n";
  }
}

std::string GroupState::describe_group() const { return c10::str("group '", board->group(), "'"); }

// ---- work -----------------------------------------------------------------------------

WorkHCCL::WorkHCCL(int rank, c10d::OpType type, uint64_t seq, Signature sig, std::vector<at::Tensor> outputs,
                   std::shared_ptr<GroupState> state, bool point_to_point)
    : c10d::Work(rank, type),
      seq_(seq),
      sig_(sig),
      outputs_(std::move(outputs)),
      state_(std::move(state)),
      point_to_point_(point_to_point) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     devices_of(outputs_));
}

bool WorkHCCL::isCompleted() {
  if (wait_driven_ && !future_->completed()) {
    c10::intrusive_ptr<c10d::Work> inner;
    {
      std::lock_guard<std::mutex> lk(done_mu_);
      inner = inner_;
    }
    if (inner && inner->isCompleted()) wait_for_transport(kNoTimeout);
  }
  return future_->completed();
}

bool WorkHCCL::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr WorkHCCL::exception() const { return future_->completed() ? future_->exception_ptr() : nullptr; }

int WorkHCCL::sourceRank() const {
  TORCH_CHECK(inner_ && sig_.peer < 0, "sourceRank() is only available for a receive from any source");
  return inner_->sourceRank();
}

std::vector<at::Tensor> WorkHCCL::result() { return outputs_; }

void WorkHCCL::synchronize() { wait(); }

void WorkHCCL::blockCurrentStream() { wait(); }

void WorkHCCL::abort() {
  c10::intrusive_ptr<c10d::Work> inner;
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    inner = inner_;
  }
  if (inner) inner->abort();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkHCCL::getFuture() { return future_; }

uint64_t WorkHCCL::getSequencenumber() const { return seq_; }

WorkHCCL::~WorkHCCL() { observe::collective_destroyed(this); }

void WorkHCCL::complete() {
  observe::collective_completed(this);  // the profiler's row of collectives
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    if (done_) return;
    done_ = true;
  }
  if (!point_to_point_) state_->board->set_state(seq_, EntryState::kCompleted);
  {
    observe::CollectiveCompletion on_collective_stream(this, devices_of(outputs_));
    future_->markCompleted(c10::IValue(outputs_));
  }
  done_cv_.notify_all();
}

void WorkHCCL::fail(std::exception_ptr error) {
  observe::collective_completed(this);
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    if (done_) return;
    done_ = true;
  }
  if (!point_to_point_) state_->board->set_state(seq_, EntryState::kFailed);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    state_->mark_broken(what_of(e));
  } catch (...) {
    state_->mark_broken("unknown error");
  }
  future_->setError(error);
  done_cv_.notify_all();
}

std::exception_ptr WorkHCCL::diagnose(const std::string& transport_error) const {
  const Board& board = *state_->board;
  const bool timed_out = transport_error.find("imed out") != std::string::npos;
  std::string what = point_to_point_ ? c10::str("hccl ", describe(sig_), " on group '", board.group(), "'")
                                     : c10::str("hccl ", describe(sig_), " (#", seq_, " on group '", board.group(), "')");
  std::string head;
  std::string gone = point_to_point_ ? board.first_gone_peer({sig_.peer})
                                     : board.first_gone_peer(board.unfinished_peers(seq_));
  std::vector<int> absent = point_to_point_ ? std::vector<int>{} : board.absent_peers(seq_);
  auto ranks_text = [](const std::vector<int>& rs) {
    std::ostringstream o;
    o << (rs.size() > 1 ? "ranks " : "rank ");
    for (size_t i = 0; i < rs.size(); ++i) o << (i ? ", " : "") << rs[i];
    return o.str();
  };
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.2f s", state_->timeout.count() / 1000.0);
  if (!gone.empty()) {
    head = c10::str(what, " failed on rank ", state_->rank, ": ", gone, " while it was in flight");
  } else if (timed_out && !absent.empty()) {
    head = c10::str(what, " timed out after ", secs, " on rank ", state_->rank, ": ", ranks_text(absent),
                    " did not arrive");
  } else if (timed_out) {
    head = c10::str(what, " timed out after ", secs, " on rank ", state_->rank,
                    ": every rank arrived, and the transport did not complete");
  } else {
    // The cause in the first line; the full transport error follows the report.
    head = c10::str(what, " failed on rank ", state_->rank, ": ", transport_error.substr(0, transport_error.find('\n')));
  }
  std::string msg = board.report(head, point_to_point_ ? 0 : seq_);
  msg += c10::str("\nTransport error: ", transport_error);
  if (timed_out) {
    msg += "\nThe timeout comes from init_process_group(timeout=...) or, when that is not given, HCCL_EXEC_TIMEOUT "
           "(seconds)";
  }
  msg += "\nThe group is no longer usable: call torch.distributed.destroy_process_group() and init_process_group() "
         "again.";
  return dist_error(msg);
}

void WorkHCCL::set_transport_work(c10::intrusive_ptr<c10d::Work> inner) {
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    inner_ = std::move(inner);
  }
  done_cv_.notify_all();
}

bool WorkHCCL::wait_for_transport(std::chrono::milliseconds timeout) {
  c10::intrusive_ptr<c10d::Work> inner;
  {
    // A checked receive gets its transport work once the send is posted (or fails).
    std::unique_lock<std::mutex> lk(done_mu_);
    done_cv_.wait(lk, [&] { return done_ || inner_; });
    if (done_) return true;
    inner = inner_;
  }
  try {
    inner->wait(timeout == kNoTimeout ? state_->timeout : timeout);
    if (finish_) finish_();
    complete();
  } catch (const std::exception& e) {
    fail(diagnose(what_of(e)));
  }
  return true;
}

bool WorkHCCL::wait(std::chrono::milliseconds timeout) {
  if (wait_driven_) {
    wait_for_transport(timeout);
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    observe::collective_waited(this);  // the waiting stream is now ordered after the collective
    return true;
  }
  const int64_t start = now_ns();
  bool dumped = false;
  std::unique_lock<std::mutex> lk(done_mu_);
  while (!done_) {
    done_cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (done_) break;
    lk.unlock();
    const Board& board = *state_->board;
    const int64_t elapsed = now_ns() - start;
    std::string gone = board.first_gone_peer(board.unfinished_peers(seq_));
    if (!gone.empty()) {
      fail(diagnose("none yet (the peer was found gone while this rank waited)"));
      lk.lock();
      break;
    }
    if (timeout != kNoTimeout && elapsed > static_cast<int64_t>(timeout.count()) * 1'000'000) {
      throw_dist_error(c10::str("hccl ", describe(sig_), " (#", seq_, " on group '", board.group(),
                                "'): wait(timeout=", timeout.count(), " ms) expired before the collective completed; "
                                "it is still in flight"));
    }
    if (state_->dump_after_s > 0 && !dumped && elapsed > static_cast<int64_t>(state_->dump_after_s * 1e9)) {
      dumped = true;
      char waited[32];
      std::snprintf(waited, sizeof(waited), "%.2f s", elapsed / 1e9);
      std::cerr << board.report(c10::str("hccl: rank ", state_->rank, " has waited ", waited, " in ",
                                         describe(sig_), " (#", seq_, " on group '", board.group(), "')"),
                                seq_)
                << std::endl;
    }
    lk.lock();
  }
  lk.unlock();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  observe::collective_waited(this);
  return true;
}

// ---- process group ----------------------------------------------------------------------

ProcessGroupHCCL::ProcessGroupHCCL(c10::intrusive_ptr<c10d::Backend> transport, std::shared_ptr<Board> board, int rank,
                                   int size, c10::intrusive_ptr<Options> options, double dump_after_s)
    : c10d_npu::ProcessGroupHCCL(rank, size), transport_(std::move(transport)), options_(std::move(options)) {
  TORCH_CHECK(transport_, "hccl: a transport backend is required");
  TORCH_CHECK(board && board->world() == size && board->rank() == rank, "hccl: the collective board does not match "
              "rank ", rank, " of ", size);
  state_ = std::make_shared<GroupState>();
  state_->rank = rank;
  state_->size = size;
  state_->board = std::move(board);
  state_->timeout = options_->timeout;
  state_->dump_after_s = dump_after_s;
  if (!options_->group_name.empty()) state_->board->set_group(options_->group_name, options_->global_ranks_in_group);
}

namespace {
// Transports of groups that failed. A rank that gave up may leave a peer's transport
// operation waiting for data that never comes, until the transport's own timeout; Gloo's
// destructor waits for its operations, so destroying the group would hang that long. The
// transport is kept instead (its threads end at that timeout or with the process).
void keep_failed_transport(c10::intrusive_ptr<c10d::Backend> transport) {
  static auto* kept = new std::vector<c10::intrusive_ptr<c10d::Backend>>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  kept->push_back(std::move(transport));
}
}  // namespace

ProcessGroupHCCL::~ProcessGroupHCCL() {
  stop_receives();
  // After shutdown() (destroy_process_group) the rank has left already; otherwise the group
  // goes away with the process (an uncaught exception, sys.exit): peers are told so.
  state_->board->exit_without_destroy();
  if (state_->broken.load()) keep_failed_transport(std::move(transport_));
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupHCCL::getBackendOptions() {
  return c10::static_intrusive_pointer_cast<c10d::Backend::Options>(options_);
}

void ProcessGroupHCCL::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  transport_->setGroupUid(pg_uid);
  options_->group_name = pg_uid;
  state_->board->set_group(pg_uid, options_->global_ranks_in_group);
}

void ProcessGroupHCCL::setTimeout(std::chrono::milliseconds timeout) {
  options_->timeout = timeout;
  state_->timeout = timeout;
}

uint64_t ProcessGroupHCCL::getSequenceNumberForGroup() { return state_->board->last_posted(); }

void ProcessGroupHCCL::abort() {
  stop_receives();
  state_->board->leave();
  if (!state_->broken.load()) transport_->abort();
}

void ProcessGroupHCCL::shutdown() {
  stop_receives();
  state_->board->leave();
  if (!state_->broken.load()) transport_->shutdown();
}

void ProcessGroupHCCL::enqueue_receive(PendingRecv recv) {
  {
    std::lock_guard<std::mutex> lk(recv_mu_);
    if (pending_recvs_.empty()) pending_recvs_.resize(size_);
    if (!recv_thread_.joinable() && !recv_stop_) recv_thread_ = std::thread([this] { dispatch_receives(); });
    pending_recvs_[recv.src].push_back(std::move(recv));
  }
  recv_cv_.notify_all();
  state_->board->notify();
}

void ProcessGroupHCCL::stop_receives() {
  {
    std::lock_guard<std::mutex> lk(recv_mu_);
    recv_stop_ = true;
  }
  recv_cv_.notify_all();
  state_->board->notify();
  if (recv_thread_.joinable() && recv_thread_.get_id() != std::this_thread::get_id()) recv_thread_.join();
}

void ProcessGroupHCCL::dispatch_receives() {
  Board& board = *state_->board;
  constexpr int64_t kSliceNs = 50'000'000;
  while (true) {
    const uint32_t seen = board.changes();
    std::vector<PendingRecv> ready;
    std::vector<std::pair<PendingRecv, std::exception_ptr>> failed;
    bool waiting = false;
    {
      std::unique_lock<std::mutex> lk(recv_mu_);
      recv_cv_.wait(lk, [&] {
        if (recv_stop_) return true;
        for (const auto& q : pending_recvs_) {
          if (!q.empty()) return true;
        }
        return false;
      });
      if (recv_stop_) {
        for (auto& q : pending_recvs_) {
          for (auto& r : q) {
            failed.emplace_back(std::move(r), dist_error(c10::str("hccl recv from rank ", r.src, " on group '",
                                                                  board.group(), "': the group was destroyed before "
                                                                  "the matching send was posted")));
          }
          q.clear();
        }
      }
      const int64_t now = now_ns();
      for (auto& q : pending_recvs_) {
        while (!q.empty() && !recv_stop_) {
          PendingRecv& r = q.front();
          std::string why;
          Board::SendCheck check = board.check_send(r.src, r.n, r.sig, &why);
          if (check == Board::SendCheck::kNotYet) {
            std::string problem;
            if (now >= r.deadline_ns) {
              problem = board.report(
                  c10::str("hccl recv of ", describe(r.sig), " on group '", board.group(), "' timed out after ",
                           state_->timeout.count() / 1000.0, " s on rank ", rank_, ": rank ", r.src,
                           " did not post its send #", r.n, " to rank ", rank_,
                           ". The timeout comes from init_process_group(timeout=...) or HCCL_EXEC_TIMEOUT"),
                  0);
            } else if (now - r.checked_ns >= kSliceNs) {
              r.checked_ns = now;
              std::string gone = board.first_gone_peer({r.src});
              if (!gone.empty()) {
                problem = board.report(c10::str("hccl recv of ", describe(r.sig), " on group '", board.group(),
                                                "' cannot complete: ", gone, " before sending"),
                                       0);
              }
            }
            if (problem.empty()) {
              waiting = true;
              break;
            }
            why = problem;
          }
          if (!why.empty()) {
            // The unread message would reach the next receive from this source: fail those too.
            for (auto& rest : q) failed.emplace_back(std::move(rest), dist_error(why));
            q.clear();
            break;
          }
          ready.push_back(std::move(r));
          q.pop_front();
        }
      }
    }
    for (auto& r : ready) {
      try {
        r.work->set_transport_work(transport_->recv(r.views, r.src, 0));
      } catch (const std::exception& e) {
        r.work->fail(dist_error(c10::str("hccl recv from rank ", r.src, " could not start on rank ", rank_, ": ",
                                         what_of(e))));
      }
    }
    for (auto& f : failed) f.first.work->fail(f.second);
    {
      std::lock_guard<std::mutex> lk(recv_mu_);
      if (recv_stop_) {
        bool empty = true;
        for (const auto& q : pending_recvs_) empty = empty && q.empty();
        if (empty) return;
        continue;
      }
    }
    if (waiting && ready.empty() && failed.empty()) board.wait_for_change(seen, 20'000'000);
  }
}

void ProcessGroupHCCL::check_usable(Op op) const {
  if (state_->broken.load()) {
    std::string first_line;
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      first_line = state_->broken_reason.substr(0, state_->broken_reason.find('\n'));
    }
    throw_dist_error(c10::str("hccl ", op_name(op), " on group '", state_->board->group(),
                              "': the group is no longer usable after an earlier failure (", first_line,
                              "). Call torch.distributed.destroy_process_group() and init_process_group() again"));
  }
}

std::string ProcessGroupHCCL::remote_check(uint64_t seq, const Signature& sig, std::chrono::milliseconds timeout) {
  const int64_t n = static_cast<int64_t>(sizeof(Signature));
  at::Tensor mine = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(mine.data_ptr(), &sig, sizeof(Signature));
  at::Tensor all = at::empty({n * size_}, at::TensorOptions().dtype(at::kByte));
  c10d::AllgatherOptions o;
  o.timeout = timeout;
  transport_->_allgather_base(all, mine, o)->wait();
  const auto* sigs = reinterpret_cast<const Signature*>(all.data_ptr());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::string why = incompatibility(sig, rank_, sigs[r], r);
    if (!why.empty()) {
      return c10::str("hccl ", op_name(static_cast<Op>(sig.op)), " (#", seq, " on group '", state_->board->group(),
                      "'): ", why, ". No rank entered the transport");
    }
  }
  return "";
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::collective(Op op, const Signature& sig,
                                                            std::vector<at::Tensor> outputs,
                                                            std::chrono::milliseconds requested_timeout,
                                                            c10d::OpType type, const Start& start, Finish finish,
                                                            const std::vector<at::Tensor>& inputs) {
  return coalesce(issue_collective(op, sig, std::move(outputs), requested_timeout, type, start, std::move(finish),
                                   inputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::issue_collective(Op op, const Signature& sig,
                                                                  std::vector<at::Tensor> outputs,
                                                                  std::chrono::milliseconds requested_timeout,
                                                                  c10d::OpType type, const Start& start,
                                                                  Finish finish,
                                                                  const std::vector<at::Tensor>& inputs) {
  check_usable(op);
  // The stream sanitizer checks the collective before any peer is told about it.
  observe::collective_check(std::string("hccl:") + op_name(op), inputs, outputs);
  const auto timeout = resolve_timeout(requested_timeout, *state_);
  Board& board = *state_->board;
  std::unique_lock<std::mutex> issue(issue_mu_);
  const uint64_t seq = board.post(sig);
  std::string mismatch;
  try {
    if (board.shared()) {
      // A barrier waits for everyone; a collective enters the transport at once (the peers
      // that arrive later compare with it before they do).
      mismatch = board.await_peers(seq, timeout, state_->dump_after_s, /*all=*/!start);
    } else if (size_ > 1) {
      mismatch = remote_check(seq, sig, timeout);
    }
  } catch (const std::exception& e) {
    board.set_state(seq, EntryState::kFailed);
    std::string msg = what_of(e);
    state_->mark_broken(msg);
    throw_dist_error(msg);
  }
  if (!mismatch.empty()) {
    // Peers that posted first may already wait in the transport for this rank: the group
    // cannot continue. They learn why from the board.
    board.set_state(seq, EntryState::kFailed);
    std::string msg = mismatch + c10::str(". The group is no longer usable: call "
                                          "torch.distributed.destroy_process_group() and init_process_group() again");
    state_->mark_broken(msg);
    throw_dist_error(msg);
  }
  board.set_state(seq, EntryState::kRunning);
  auto work = c10::make_intrusive<WorkHCCL>(rank_, type, seq, sig, std::move(outputs), state_, false);
  observe::collective_issued(work.get(), std::string("hccl:") + op_name(op), work->result());
  if (!start) {  // nothing to transfer (a barrier on a shared board: the arrival was the barrier)
    work->complete();
    return work;
  }
  c10::intrusive_ptr<c10d::Work> inner;
  try {
    inner = start(timeout);
  } catch (const std::exception& e) {
    auto err = dist_error(c10::str("hccl ", describe(sig), " (#", seq, " on group '", board.group(),
                                   "') could not start on rank ", rank_, ": ", what_of(e)));
    work->fail(err);
    std::rethrow_exception(err);
  }
  work->set_transport_work(inner);
  issue.unlock();
  c10::intrusive_ptr<c10::ivalue::Future> transport_future;
  try {
    transport_future = inner->getFuture();
  } catch (const std::exception&) {
    // Some Gloo works (e.g. reduce_scatter_tensor) have no future: complete on wait().
  }
  if (!transport_future) {
    work->complete_on_wait(std::move(finish));
    return work;
  }
  transport_future->addCallback([work, finish = std::move(finish)](c10::ivalue::Future& f) {
    if (f.hasError()) {
      work->fail(work->diagnose(what_of(f.exception_ptr())));
      return;
    }
    try {
      if (finish) finish();
      work->complete();
    } catch (const std::exception& e) {
      work->fail(dist_error(c10::str("hccl: finishing the collective failed: ", what_of(e))));
    }
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::point_to_point(Op op, const Signature& sig,
                                                                std::vector<at::Tensor> tensors, c10d::OpType type,
                                                                const Start& start) {
  check_usable(op);
  const std::string observed = std::string("hccl:") + op_name(op);
  if (op == Op::kSend) {
    observe::collective_check(observed, tensors, {});
  } else {
    observe::collective_check(observed, {}, tensors);
  }
  auto work = c10::make_intrusive<WorkHCCL>(rank_, type, 0, sig, std::move(tensors), state_, true);
  observe::collective_issued(work.get(), observed, work->result());
  work->complete_on_wait(nullptr);
  try {
    work->set_transport_work(start(state_->timeout));
  } catch (const std::exception& e) {
    auto err = dist_error(c10::str("hccl ", describe(sig), " could not start on rank ", rank_, ": ", what_of(e)));
    work->fail(err);
    std::rethrow_exception(err);
  }
  return coalesce(work);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::capture(Op op, c10d::OpType type, std::vector<at::Tensor> outputs,
                                                         std::function<c10::intrusive_ptr<c10d::Work>()> reissue) {
  check_usable(op);
  // Replays issue the collective again through this group, on the graph's static tensors,
  // in the order of the capture (every rank replays its graph in the same order), and wait
  // for it: the next replayed node uses its result. The group stays alive with the graph.
  auto self = c10::intrusive_ptr<ProcessGroupHCCL>::reclaim_copy(this);
  record_host_call([self, reissue = std::move(reissue)]() { reissue()->wait(); }, outputs);
  auto work = c10::make_intrusive<WorkHCCL>(rank_, type, 0, Signature{}, std::move(outputs), state_, true);
  work->complete();
  return coalesce(work);
}

// ---- coalescing -------------------------------------------------------------------------

namespace {
// The work endCoalescing returns. This backend has no fused launch to gain by deferring the
// collectives of a coalescing region, so they ran as they were issued; this work completes
// when all of them have, and fails with the first failure.
class WorkCoalesced : public c10d::Work {
 public:
  WorkCoalesced(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
      : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {}

  bool isCompleted() override {
    for (auto& w : works_) {
      if (!w->isCompleted()) return false;
    }
    return true;
  }
  bool isSuccess() const override {
    for (const auto& w : works_) {
      if (!w->isSuccess()) return false;
    }
    return true;
  }
  std::exception_ptr exception() const override {
    for (const auto& w : works_) {
      if (auto e = w->exception()) return e;
    }
    return nullptr;
  }
  std::vector<at::Tensor> result() override {
    std::vector<at::Tensor> out;
    for (auto& w : works_) {
      auto r = w->result();
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    // In issue order: every rank waits in the same order.
    for (auto& w : works_) w->wait(timeout);
    return true;
  }
  void synchronize() override {
    for (auto& w : works_) w->synchronize();
  }
  void blockCurrentStream() override {
    for (auto& w : works_) w->blockCurrentStream();
  }
  void abort() override {
    for (auto& w : works_) w->abort();
  }
  uint64_t getSequencenumber() const override {
    return works_.empty() ? 0 : works_.back()->getSequencenumber();
  }
  // Completes when every collective's future has (a collective whose transport has no
  // future completes on wait(), as it does alone).
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    if (works_.size() == 1) return works_.front()->getFuture();
    std::lock_guard<std::mutex> lk(mu_);
    if (future_) return future_;
    auto outputs = result();
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       devices_of(outputs));
    if (works_.empty()) {
      future_->markCompleted(c10::IValue(outputs));
      return future_;
    }
    auto remaining = std::make_shared<std::atomic<size_t>>(works_.size());
    for (auto& w : works_) {
      w->getFuture()->addCallback([future = future_, remaining, outputs](c10::ivalue::Future& f) {
        if (f.hasError()) {
          future->setErrorIfNeeded(f.exception_ptr());
          return;  // never counted: the combined future cannot also complete
        }
        if (--*remaining == 0) future->markCompleted(c10::IValue(outputs));
      });
    }
    return future_;
  }

 private:
  const std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::mutex mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};
}  // namespace

}  // namespace torch_npu::hccl

c10::intrusive_ptr<c10d::Work> c10d_npu::ProcessGroupHCCL::batch_isend_irecv(std::vector<std::string>& op_type,
                                                                            std::vector<at::Tensor>& tensors,
                                                                            std::vector<int64_t> remote_rank_list) {
  TORCH_CHECK(op_type.size() == tensors.size() && tensors.size() == remote_rank_list.size(),
              "batch_isend_irecv: op_type, tensors and remote_rank_list must have one entry per operation, got ",
              op_type.size(), ", ", tensors.size(), " and ", remote_rank_list.size());
  for (size_t i = 0; i < op_type.size(); ++i) {
    TORCH_CHECK(op_type[i] == "isend" || op_type[i] == "irecv", "batch_isend_irecv: op_type[", i, "] is '",
                op_type[i], "'; expected 'isend' or 'irecv'");
    TORCH_CHECK(remote_rank_list[i] >= 0 && remote_rank_list[i] < getSize() && remote_rank_list[i] != getRank(),
                "batch_isend_irecv: remote_rank_list[", i, "] is ", remote_rank_list[i], "; expected a rank of this "
                "group other than this rank (", getRank(), " of ", getSize(), ")");
  }
  // Sends and receives never block the caller here (a receive is posted once its send's
  // signature arrives), so posting them one by one is posting them at once.
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  works.reserve(op_type.size());
  for (size_t i = 0; i < op_type.size(); ++i) {
    std::vector<at::Tensor> one{tensors[i]};
    const int peer = static_cast<int>(remote_rank_list[i]);
    works.push_back(op_type[i] == "isend" ? send(one, peer, 0) : recv(one, peer, 0));
  }
  return c10::make_intrusive<torch_npu::hccl::WorkCoalesced>(getRank(), std::move(works));
}

namespace torch_npu::hccl {

void ProcessGroupHCCL::startCoalescing() {
  std::lock_guard<std::mutex> lk(coalesce_mu_);
  TORCH_CHECK(!coalescing_, "hccl startCoalescing on group '", state_->board->group(), "': a coalescing region is "
              "already open on this group; nested torch.distributed._coalescing_manager regions are not supported");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::endCoalescing() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> lk(coalesce_mu_);
    TORCH_CHECK(coalescing_, "hccl endCoalescing on group '", state_->board->group(), "': no coalescing region is "
                "open (startCoalescing was not called)");
    coalescing_ = false;
    works.swap(coalesced_);
  }
  // As ProcessGroupNCCL: an empty region has no work.
  if (works.empty()) return nullptr;
  return c10::make_intrusive<WorkCoalesced>(rank_, std::move(works));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::coalesce(c10::intrusive_ptr<c10d::Work> work) {
  std::lock_guard<std::mutex> lk(coalesce_mu_);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

// ---- the collectives ---------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  check_all(tensors, Op::kBroadcast, "broadcast");
  if (is_recording()) {
    return capture(Op::kBroadcast, c10d::OpType::BROADCAST, tensors,
                   [this, tensors, opts]() mutable { return broadcast(tensors, opts); });
  }
  Signature sig = make_signature(Op::kBroadcast, tensors, {});
  sig.root = static_cast<int32_t>(opts.rootRank);
  auto views = moved_views(tensors);
  return collective(Op::kBroadcast, sig, tensors, opts.timeout, c10d::OpType::BROADCAST,
                    [this, views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->broadcast(views, o);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  check_all(tensors, Op::kAllReduce, "input");
  reduction_dtype_check(tensors, Op::kAllReduce);
  TORCH_CHECK(!opts.sparseIndices.has_value(), "hccl all_reduce: sparse tensors are not supported");
  if (is_recording()) {
    return capture(Op::kAllReduce, c10d::OpType::ALLREDUCE, tensors,
                   [this, tensors, opts]() mutable { return allreduce(tensors, opts); });
  }
  Signature sig = make_signature(Op::kAllReduce, tensors, {});
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  Reduction red = plan_reduction(opts.reduceOp, Op::kAllReduce);
  auto views = host_views(tensors);
  auto staged = widen(views);
  const int size = size_;
  return collective(
      Op::kAllReduce, sig, tensors, opts.timeout, c10d::OpType::ALLREDUCE,
      [this, staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) {
          for (auto& v : staged) red.scale(v);
        }
        auto o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        return transport_->allreduce(staged, o);
      },
      red.average || any_staged(views, staged) ? Finish([views, staged, red, size]() mutable {
        for (size_t i = 0; i < views.size(); ++i) {
          unstage(views[i], staged[i]);
          red.finish(views[i], size);
        }
      })
                                               : nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  check_all(tensors, Op::kAllReduceCoalesced, "input");
  reduction_dtype_check(tensors, Op::kAllReduceCoalesced);
  if (is_recording()) {
    return capture(Op::kAllReduceCoalesced, c10d::OpType::ALLREDUCE_COALESCED, tensors,
                   [this, tensors, opts]() mutable { return allreduce_coalesced(tensors, opts); });
  }
  Signature sig = make_signature(Op::kAllReduceCoalesced, tensors, {});
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  Reduction red = plan_reduction(opts.reduceOp, Op::kAllReduceCoalesced);
  auto views = host_views(tensors);
  auto staged = widen(views);
  const int size = size_;
  return collective(
      Op::kAllReduceCoalesced, sig, tensors, opts.timeout, c10d::OpType::ALLREDUCE_COALESCED,
      [this, staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) {
          for (auto& v : staged) red.scale(v);
        }
        c10d::AllreduceCoalescedOptions o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        // Gloo coalesces tensors of one dtype only (NCCL and HCCL take any mix, and a
        // coalescing region of all_reduces of several dtypes comes here): one transport call
        // per dtype, in the order of first appearance, all but the last waited for here.
        std::vector<std::vector<at::Tensor>> by_dtype;
        for (const auto& v : staged) {
          auto same = std::find_if(by_dtype.begin(), by_dtype.end(),
                                   [&](const auto& g) { return g.front().scalar_type() == v.scalar_type(); });
          if (same == by_dtype.end()) by_dtype.push_back({v});
          else same->push_back(v);
        }
        for (size_t g = 0; g + 1 < by_dtype.size(); ++g) transport_->allreduce_coalesced(by_dtype[g], o)->wait(t);
        return transport_->allreduce_coalesced(by_dtype.empty() ? staged : by_dtype.back(), o);
      },
      red.average || any_staged(views, staged) ? Finish([views, staged, red, size]() mutable {
        for (size_t i = 0; i < views.size(); ++i) {
          unstage(views[i], staged[i]);
          red.finish(views[i], size);
        }
      })
                                               : nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  check_all(tensors, Op::kReduce, "input");
  reduction_dtype_check(tensors, Op::kReduce);
  if (is_recording()) {
    return capture(Op::kReduce, c10d::OpType::REDUCE, tensors,
                   [this, tensors, opts]() mutable { return reduce(tensors, opts); });
  }
  Signature sig = make_signature(Op::kReduce, tensors, {});
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  sig.root = static_cast<int32_t>(opts.rootRank);
  Reduction red = plan_reduction(opts.reduceOp, Op::kReduce);
  auto views = host_views(tensors);
  // PREMUL_SUM scales a copy, so that no rank's input changes except the root's result.
  std::vector<at::Tensor> staged = views;
  if (red.premul) {
    for (auto& s : staged) s = s.clone();
  }
  staged = widen(staged);
  const bool is_root = opts.rootRank == rank_;
  const int size = size_;
  return collective(
      Op::kReduce, sig, tensors, opts.timeout, c10d::OpType::REDUCE,
      [this, staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) {
          for (auto& s : staged) red.scale(s);
        }
        auto o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        return transport_->reduce(staged, o);
      },
      (red.average || any_staged(views, staged)) && is_root ? Finish([views, staged, red, size]() mutable {
        for (size_t i = 0; i < views.size(); ++i) {
          unstage(views[i], staged[i]);
          red.finish(views[i], size);
        }
      })
                                                            : nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  check_all(inputs, Op::kAllGather, "input");
  for (const auto& l : outputs) check_all(l, Op::kAllGather, "output");
  auto flat_out = flatten(outputs);
  if (is_recording()) {
    return capture(Op::kAllGather, c10d::OpType::ALLGATHER, flatten(outputs),
                   [this, outputs, inputs, opts]() mutable { return allgather(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kAllGather, inputs, flat_out);
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(outputs);
  return collective(Op::kAllGather, sig, flat_out, opts.timeout, c10d::OpType::ALLGATHER,
                    [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->allgather(out_views, in_views, o);
                    }, nullptr, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  check_npu(input, Op::kAllGatherIntoTensor, "input");
  check_npu(output, Op::kAllGatherIntoTensor, "output");
  TORCH_CHECK(output.numel() == input.numel() * size_, "hccl all_gather_into_tensor: the output must have world "
              "size (", size_, ") times the elements of the input (", input.numel(), "), got ", output.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl all_gather_into_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  if (is_recording()) {
    return capture(Op::kAllGatherIntoTensor, c10d::OpType::_ALLGATHER_BASE, {output},
                   [this, output, input, opts]() mutable { return _allgather_base(output, input, opts); });
  }
  Signature sig = make_signature(Op::kAllGatherIntoTensor, {input}, {output});
  at::Tensor in_view = moved_view(input);
  at::Tensor out_view = moved_view(output);
  return collective(Op::kAllGatherIntoTensor, sig, {output}, opts.timeout, c10d::OpType::_ALLGATHER_BASE,
                    [this, in_view, out_view, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->_allgather_base(out_view, in_view, o);
                    }, nullptr, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  check_all(inputs, Op::kAllGatherCoalesced, "input");
  for (const auto& l : output_lists) check_all(l, Op::kAllGatherCoalesced, "output");
  auto flat_out = flatten(output_lists);
  if (is_recording()) {
    return capture(Op::kAllGatherCoalesced, c10d::OpType::ALLGATHER_COALESCED, flatten(output_lists),
                   [this, output_lists, inputs, opts]() mutable { return allgather_coalesced(output_lists, inputs, opts); });
  }
  Signature sig = make_signature(Op::kAllGatherCoalesced, inputs, flat_out);
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(output_lists);
  return collective(Op::kAllGatherCoalesced, sig, flat_out, opts.timeout, c10d::OpType::ALLGATHER_COALESCED,
                    [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->allgather_coalesced(out_views, in_views, o);
                    }, nullptr, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  check_all(inputs, Op::kAllGatherIntoTensorCoalesced, "input");
  check_all(outputs, Op::kAllGatherIntoTensorCoalesced, "output");
  if (is_recording()) {
    return capture(Op::kAllGatherIntoTensorCoalesced, c10d::OpType::COALESCED, outputs,
                   [this, outputs, inputs, opts]() mutable { return allgather_into_tensor_coalesced(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kAllGatherIntoTensorCoalesced, inputs, outputs);
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(outputs);
  return collective(Op::kAllGatherIntoTensorCoalesced, sig, outputs, opts.timeout, c10d::OpType::COALESCED,
                    [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->allgather_into_tensor_coalesced(out_views, in_views, o);
                    }, nullptr, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  check_all(inputs, Op::kGather, "input");
  for (const auto& l : outputs) check_all(l, Op::kGather, "output");
  auto flat_out = flatten(outputs);
  if (is_recording()) {
    return capture(Op::kGather, c10d::OpType::GATHER, flatten(outputs),
                   [this, outputs, inputs, opts]() mutable { return gather(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kGather, inputs, flat_out);
  sig.root = static_cast<int32_t>(opts.rootRank);
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(outputs);
  return collective(Op::kGather, sig, flat_out, opts.timeout, c10d::OpType::GATHER,
                    [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->gather(out_views, in_views, o);
                    }, nullptr, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  check_all(outputs, Op::kScatter, "output");
  for (const auto& l : inputs) check_all(l, Op::kScatter, "input");
  if (is_recording()) {
    return capture(Op::kScatter, c10d::OpType::SCATTER, outputs,
                   [this, outputs, inputs, opts]() mutable { return scatter(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kScatter, flatten(inputs), outputs);
  sig.root = static_cast<int32_t>(opts.rootRank);
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(outputs);
  return collective(Op::kScatter, sig, outputs, opts.timeout, c10d::OpType::SCATTER,
                    [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->scatter(out_views, in_views, o);
                    }, nullptr, flatten(inputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  check_all(outputs, Op::kReduceScatter, "output");
  for (const auto& l : inputs) check_all(l, Op::kReduceScatter, "input");
  reduction_dtype_check(outputs, Op::kReduceScatter);
  if (is_recording()) {
    return capture(Op::kReduceScatter, c10d::OpType::REDUCE_SCATTER, outputs,
                   [this, outputs, inputs, opts]() mutable { return reduce_scatter(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kReduceScatter, flatten(inputs), outputs);
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  Reduction red = plan_reduction(opts.reduceOp, Op::kReduceScatter);
  auto in_views = host_views(inputs);
  if (red.premul) {
    for (auto& l : in_views) {
      for (auto& v : l) v = v.clone();
    }
  }
  in_views = widen(in_views);
  auto out_views = host_views(outputs);
  auto out_staged = widened_outputs(out_views);
  const int size = size_;
  return collective(
      Op::kReduceScatter, sig, outputs, opts.timeout, c10d::OpType::REDUCE_SCATTER,
      [this, in_views, out_staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) {
          for (auto& l : in_views) {
            for (auto& v : l) red.scale(v);
          }
        }
        auto o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        return transport_->reduce_scatter(out_staged, in_views, o);
      },
      red.average || any_staged(out_views, out_staged) ? Finish([out_views, out_staged, red, size]() mutable {
        for (size_t i = 0; i < out_views.size(); ++i) {
          unstage(out_views[i], out_staged[i]);
          red.finish(out_views[i], size);
        }
      })
                                                       : nullptr, flatten(inputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  check_npu(input, Op::kReduceScatterTensor, "input");
  check_npu(output, Op::kReduceScatterTensor, "output");
  reduction_dtype_check({input}, Op::kReduceScatterTensor);
  TORCH_CHECK(input.numel() == output.numel() * size_, "hccl reduce_scatter_tensor: the input must have world size (",
              size_, ") times the elements of the output (", output.numel(), "), got ", input.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccl reduce_scatter_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  if (is_recording()) {
    return capture(Op::kReduceScatterTensor, c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                   [this, output, input, opts]() mutable { return _reduce_scatter_base(output, input, opts); });
  }
  Signature sig = make_signature(Op::kReduceScatterTensor, {input}, {output});
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  Reduction red = plan_reduction(opts.reduceOp, Op::kReduceScatterTensor);
  at::Tensor in_view = host_view(input);
  if (red.premul) in_view = in_view.clone();
  in_view = widen(in_view);
  at::Tensor out_view = host_view(output);
  at::Tensor out_staged = widened_output(out_view);
  const int size = size_;
  return collective(
      Op::kReduceScatterTensor, sig, {output}, opts.timeout, c10d::OpType::_REDUCE_SCATTER_BASE,
      [this, in_view, out_staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) red.scale(in_view);
        auto o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        return transport_->_reduce_scatter_base(out_staged, in_view, o);
      },
      red.average || !out_view.is_same(out_staged) ? Finish([out_view, out_staged, red, size]() mutable {
        unstage(out_view, out_staged);
        red.finish(out_view, size);
      })
                                                   : nullptr, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  check_all(outputs, Op::kReduceScatterTensorCoalesced, "output");
  check_all(inputs, Op::kReduceScatterTensorCoalesced, "input");
  reduction_dtype_check(inputs, Op::kReduceScatterTensorCoalesced);
  if (is_recording()) {
    return capture(Op::kReduceScatterTensorCoalesced, c10d::OpType::COALESCED, outputs,
                   [this, outputs, inputs, opts]() mutable { return reduce_scatter_tensor_coalesced(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kReduceScatterTensorCoalesced, inputs, outputs);
  sig.reduce_op = static_cast<uint8_t>(opts.reduceOp.op_);
  Reduction red = plan_reduction(opts.reduceOp, Op::kReduceScatterTensorCoalesced);
  auto in_views = host_views(inputs);
  if (red.premul) {
    for (auto& v : in_views) v = v.clone();
  }
  in_views = widen(in_views);
  auto out_views = host_views(outputs);
  auto out_staged = widened_outputs(out_views);
  const int size = size_;
  return collective(
      Op::kReduceScatterTensorCoalesced, sig, outputs, opts.timeout, c10d::OpType::COALESCED,
      [this, in_views, out_staged, opts, red](std::chrono::milliseconds t) mutable {
        if (red.premul) {
          for (auto& v : in_views) red.scale(v);
        }
        auto o = opts;
        o.reduceOp = red.transport;
        o.timeout = t;
        return transport_->reduce_scatter_tensor_coalesced(out_staged, in_views, o);
      },
      red.average || any_staged(out_views, out_staged) ? Finish([out_views, out_staged, red, size]() mutable {
        for (size_t i = 0; i < out_views.size(); ++i) {
          unstage(out_views[i], out_staged[i]);
          red.finish(out_views[i], size);
        }
      })
                                                       : nullptr, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  check_npu(input, Op::kAllToAllSingle, "input");
  check_npu(output, Op::kAllToAllSingle, "output");
  if (is_recording()) {
    return capture(Op::kAllToAllSingle, c10d::OpType::ALLTOALL_BASE, {output},
                   [this, output, input, output_split_sizes, input_split_sizes, opts]() mutable { return alltoall_base(output, input, output_split_sizes, input_split_sizes, opts); });
  }
  Signature sig = make_signature(Op::kAllToAllSingle, {input}, {output});
  if (size_ <= kMaxSplitRanks) {
    auto fill = [&](const at::Tensor& t, const std::vector<int64_t>& splits, int64_t* dst) {
      const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
      const int64_t row_numel = rows > 0 ? t.numel() / rows : 0;
      for (int r = 0; r < size_; ++r) {
        dst[r] = splits.empty() ? (size_ > 0 ? t.numel() / size_ : 0) : splits.at(r) * row_numel;
      }
    };
    TORCH_CHECK(input_split_sizes.empty() || static_cast<int>(input_split_sizes.size()) == size_,
                "hccl all_to_all_single: input_split_sizes needs one entry per rank (", size_, "), got ",
                input_split_sizes.size());
    TORCH_CHECK(output_split_sizes.empty() || static_cast<int>(output_split_sizes.size()) == size_,
                "hccl all_to_all_single: output_split_sizes needs one entry per rank (", size_, "), got ",
                output_split_sizes.size());
    fill(input, input_split_sizes, sig.in_splits);
    fill(output, output_split_sizes, sig.out_splits);
    sig.nsplits = size_;
  }
  at::Tensor in_view = moved_view(input);
  at::Tensor out_view = moved_view(output);
  return collective(Op::kAllToAllSingle, sig, {output}, opts.timeout, c10d::OpType::ALLTOALL_BASE,
                    [this, in_view, out_view, output_split_sizes, input_split_sizes,
                     opts](std::chrono::milliseconds t) mutable {
                      auto o = opts;
                      o.timeout = t;
                      return transport_->alltoall_base(out_view, in_view, output_split_sizes, input_split_sizes, o);
                    }, nullptr, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  check_all(outputs, Op::kAllToAll, "output");
  check_all(inputs, Op::kAllToAll, "input");
  if (is_recording()) {
    return capture(Op::kAllToAll, c10d::OpType::ALLTOALL, outputs,
                   [this, outputs, inputs, opts]() mutable { return alltoall(outputs, inputs, opts); });
  }
  Signature sig = make_signature(Op::kAllToAll, inputs, outputs);
  if (size_ <= kMaxSplitRanks && static_cast<int>(inputs.size()) == size_ &&
      static_cast<int>(outputs.size()) == size_) {
    for (int r = 0; r < size_; ++r) {
      sig.in_splits[r] = inputs[r].numel();
      sig.out_splits[r] = outputs[r].numel();
    }
    sig.nsplits = size_;
  }
  auto in_views = moved_views(inputs);
  auto out_views = moved_views(outputs);
  auto same_sizes = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    for (const auto* list : {&a, &b}) {
      for (const auto& t : *list) {
        if (t.sizes() != a.front().sizes()) return false;
      }
    }
    return true;
  };
  if (inputs.empty() || outputs.empty() || same_sizes(inputs, outputs)) {
    return collective(Op::kAllToAll, sig, outputs, opts.timeout, c10d::OpType::ALLTOALL,
                      [this, in_views, out_views, opts](std::chrono::milliseconds t) mutable {
                        auto o = opts;
                        o.timeout = t;
                        return transport_->alltoall(out_views, in_views, o);
                      }, nullptr, inputs);
  }
  // Tensors of different sizes (NCCL's and HCCL's alltoallv; Gloo's all_to_all takes equal
  // sizes only): the bytes go through one staging buffer each way, split per rank.
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "hccl all_to_all: needs one input and one output tensor per rank (", size_, "), got ", inputs.size(),
              " inputs and ", outputs.size(), " outputs");
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& t : *list) {
      TORCH_CHECK(t.scalar_type() == inputs.front().scalar_type(), "hccl all_to_all: every tensor must have one "
                  "dtype, got ", inputs.front().scalar_type(), " and ", t.scalar_type());
    }
  }
  auto as_bytes = [](const at::Tensor& v) { return v.view(at::kByte).reshape({-1}); };
  std::vector<int64_t> in_splits, out_splits;
  int64_t out_total = 0;
  for (int r = 0; r < size_; ++r) {
    in_splits.push_back(static_cast<int64_t>(inputs[r].nbytes()));
    out_splits.push_back(static_cast<int64_t>(outputs[r].nbytes()));
    out_total += out_splits.back();
  }
  auto staged_out = std::make_shared<at::Tensor>(at::empty({out_total}, at::TensorOptions().dtype(at::kByte)));
  return collective(
      Op::kAllToAll, sig, outputs, opts.timeout, c10d::OpType::ALLTOALL,
      [this, in_views, staged_out, in_splits, out_splits, as_bytes, opts](std::chrono::milliseconds t) mutable {
        std::vector<at::Tensor> parts;
        for (const auto& v : in_views) parts.push_back(as_bytes(v));
        at::Tensor staged_in = at::cat(parts);
        auto o = opts;
        o.timeout = t;
        return transport_->alltoall_base(*staged_out, staged_in, out_splits, in_splits, o);
      },
      Finish([out_views, staged_out, out_splits, as_bytes]() mutable {
        int64_t offset = 0;
        for (size_t r = 0; r < out_views.size(); ++r) {
          as_bytes(out_views[r]).copy_(staged_out->narrow(0, offset, out_splits[r]));
          offset += out_splits[r];
        }
      }),
      inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  Signature sig = make_signature(Op::kBarrier, {}, {});
  if (state_->board->shared()) {
    return collective(Op::kBarrier, sig, {}, opts.timeout, c10d::OpType::BARRIER, nullptr);
  }
  return collective(Op::kBarrier, sig, {}, opts.timeout, c10d::OpType::BARRIER,
                    [this, opts](std::chrono::milliseconds t) {
                      auto o = opts;
                      o.timeout = t;
                      o.device = std::nullopt;
                      return transport_->barrier(o);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  check_all(tensors, Op::kSend, "send");
  // The argument errors torch.distributed.send gives; checked before anything is posted, so
  // the group stays usable.
  TORCH_CHECK_VALUE(dst != rank_, "Invalid destination rank: destination rank should not be the same as the rank of "
                    "the current process (hccl send to rank ", dst, " on rank ", rank_, "; this backend has no "
                    "send to the own rank: copy the tensor instead)");
  if (is_recording()) {
    return capture(Op::kSend, c10d::OpType::SEND, tensors,
                   [this, tensors, dst, tag]() mutable { return send(tensors, dst, tag); });
  }
  Signature sig = make_signature(Op::kSend, tensors, {});
  sig.peer = dst;
  sig.tag = tag;
  if (tag == 0) state_->board->post_send(dst, sig);
  auto views = moved_views(tensors);
  return point_to_point(Op::kSend, sig, tensors, c10d::OpType::SEND,
                        [this, views, dst, tag](std::chrono::milliseconds) mutable {
                          return transport_->send(views, dst, tag);
                        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  check_all(tensors, Op::kRecv, "recv");
  TORCH_CHECK_VALUE(src != rank_, "Invalid source rank: source rank should not be the same as the rank of the "
                    "current process (hccl recv from rank ", src, " on rank ", rank_, "; this backend has no "
                    "receive from the own rank: copy the tensor instead)");
  if (is_recording()) {
    return capture(Op::kRecv, c10d::OpType::RECV, tensors,
                   [this, tensors, src, tag]() mutable { return recv(tensors, src, tag); });
  }
  Signature sig = make_signature(Op::kRecv, {}, tensors);
  sig.peer = src;
  sig.tag = tag;
  auto views = moved_views(tensors);
  if (tag == 0 && state_->board->p2p_checked() && src >= 0 && src < size_ && src != rank_) {
    check_usable(Op::kRecv);
    observe::collective_check("hccl:recv", {}, tensors);
    auto work = c10::make_intrusive<WorkHCCL>(rank_, c10d::OpType::RECV, 0, sig, tensors, state_, true);
    observe::collective_issued(work.get(), "hccl:recv", work->result());
    work->complete_on_wait(nullptr);
    uint64_t n;
    {
      std::lock_guard<std::mutex> lk(recv_mu_);
      if (recv_counts_.empty()) recv_counts_.assign(size_, 0);
      n = ++recv_counts_[src];
    }
    const int64_t now = now_ns();
    enqueue_receive(PendingRecv{work, views, src, n, sig, now + static_cast<int64_t>(state_->timeout.count()) * 1'000'000,
                                now});
    return coalesce(work);
  }
  return point_to_point(Op::kRecv, sig, tensors, c10d::OpType::RECV,
                        [this, views, src, tag](std::chrono::milliseconds) mutable {
                          return transport_->recv(views, src, tag);
                        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  check_all(tensors, Op::kRecv, "recv");
  Signature sig = make_signature(Op::kRecv, {}, tensors);
  sig.tag = tag;
  auto views = moved_views(tensors);
  return point_to_point(Op::kRecv, sig, tensors, c10d::OpType::RECVANYSOURCE,
                        [this, views, tag](std::chrono::milliseconds) mutable {
                          return transport_->recvAnysource(views, tag);
                        });
}

}  // namespace torch_npu::hccl
