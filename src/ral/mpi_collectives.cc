#include "ral/mpi_collectives.h"

#include "ral/collective_types.h"

#include "base/futex.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::ral::internal {

// What a rank tells the others about each collective (sent as bytes: every rank runs the same
// build). Ranks agree when every field but the text is equal; the text is for messages. Outside
// the unnamed namespace: MpiCollectives::Pending, declared in the header, holds some.
struct Description {
  uint64_t number = 0;  // the collective's place in its process's sequence, from 1
  int64_t count = 0;
  int32_t kind = 0, type = 0, op = 0, root = 0;
  char text[160] = {};

  bool agrees(const Description& o) const { return number == o.number && call() == o.call(); }
  // What a call is, apart from its place in the sequence.
  std::array<int64_t, 5> call() const { return {count, kind, type, op, root}; }
};

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

// The MPI datatype of an element type: bool as bytes of 0 and 1 (combined by max and min), f16
// and bf16 as their 16 bits (moved, never combined: their reductions are staged in f32).
MPI_Datatype mpi_type(ir::DType type) {
  switch (type) {
    case ir::DType::kBool: return MPI_UINT8_T;
    case ir::DType::kI8: return MPI_INT8_T;
    case ir::DType::kU8: return MPI_UINT8_T;
    case ir::DType::kI16: return MPI_INT16_T;
    case ir::DType::kU16: return MPI_UINT16_T;
    case ir::DType::kI32: return MPI_INT32_T;
    case ir::DType::kU32: return MPI_UINT32_T;
    case ir::DType::kI64: return MPI_INT64_T;
    case ir::DType::kU64: return MPI_UINT64_T;
    case ir::DType::kF16: return MPI_UINT16_T;
    case ir::DType::kBF16: return MPI_UINT16_T;
    case ir::DType::kF32: return MPI_FLOAT;
    case ir::DType::kF64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kMax: return MPI_MAX;
    case CollectiveOp::kMin: return MPI_MIN;
    default: return MPI_SUM;  // mean: the sum, divided afterwards
  }
}

Description describe(const Collective& c, uint64_t number) {
  Description d;
  d.number = number;
  d.count = c.count;
  d.kind = static_cast<int32_t>(c.kind);
  d.type = static_cast<int32_t>(c.type);
  // Only what the kind uses takes part in the comparison.
  d.op = c.kind == CollectiveKind::kAllreduce || c.kind == CollectiveKind::kReduceScatter ? static_cast<int32_t>(c.op) : 0;
  d.root = c.kind == CollectiveKind::kBroadcast ? c.root : 0;
  const std::string text = c.describe();
  std::memcpy(d.text, text.data(), std::min(text.size(), sizeof d.text - 1));
  return d;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

Status mpi_status(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return Status();
  return unavailable_error(std::string(what) + ": " + mpi_error_text(code));
}

namespace {

// mpi_status() for a call about `c`, its message ("DOING" and c's description) built only for an
// error: these calls run in polling loops.
Status mpi_call_status(int code, const char* doing, const Collective& c) {
  if (code == MPI_SUCCESS) return Status();
  return mpi_status(code, std::string(doing) + c.describe());
}

}  // namespace

struct MpiCollectives::Pending {
  Collective c;
  CollectiveDone done;
  Status outcome;
  Description mine;
  std::vector<Description> theirs;   // one per other rank, in rank order
  std::vector<int> peers;            // those ranks
  std::vector<MPI_Request> exchange;  // the receives (peers' order), then the sends
  MPI_Request data = MPI_REQUEST_NULL;
  // A reduction staged in another type (collective_types.h): the values converted into it, and
  // for reduce_scatter this rank's part of the combination.
  Combination how;
  std::vector<std::byte> staged_in, staged_out;
  bool begun = false;      // its descriptions are on their way
  bool checked = false;    // every description arrived and agrees
  bool posted = false;     // the data's collective is posted
  bool data_done = false;  // ... and MPI completed it
  Status data_error;       // ... or failed it: reported once the descriptions agree
  Clock::time_point deadline;
};

MpiCollectives::MpiCollectives(MPI_Comm data, MPI_Comm check, int rank, int size, double timeout_seconds)
    : data_(data), check_(check), rank_(rank), size_(size), timeout_(timeout_seconds) {}

MpiCollectives::~MpiCollectives() { stop(); }

bool MpiCollectives::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (broken_.ok()) broken_ = cancelled_error("kiln's collectives were stopped: the process is ending");
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Abandoned (see the header): their requests may still point into them.
  for (auto& p : incoming_) (void)p.release();
  for (auto& p : active_) (void)p.release();
  incoming_.clear();
  active_.clear();
  return in_flight_.load() > 0 || failed_;
}

void MpiCollectives::start(Collective c, CollectiveDone done) {
  auto p = std::make_unique<Pending>();
  p->c = std::move(c);
  p->done = std::move(done);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!broken_.ok()) {
    lock.unlock();
    p->done(broken_.annotate(p->c.describe() + ": not run"));
    return;
  }
  p->mine = describe(p->c, ++started_);
  // Nothing else in flight: this thread posts it and waits a little for it (see the header).
  if (in_flight_.fetch_add(1) == 0 && !stopping_) {
    caller_posting_ = true;
    lock.unlock();
    run_on_caller(std::move(p));
    return;
  }
  incoming_.push_back(std::move(p));
  start_thread();
  lock.unlock();
  wake_.notify_all();
}

void MpiCollectives::start_thread() {
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { main(); });
}

void MpiCollectives::run_on_caller(std::unique_ptr<Pending> p) {
  Status failed = begin(*p);
  bool complete = false;
  const Clock::time_point until = Clock::now() + kCallerPoll;
  for (uint32_t step = 1; failed.ok(); ++step) {
    failed = progress(*p, /*earlier_unposted=*/false, complete);
    if (complete || Clock::now() > until) break;
    spin_pause(step);
  }
  std::deque<std::unique_ptr<Pending>> ended;
  bool handed_over = false;
  if (!failed.ok()) {
    p->outcome = failed;
    ended.push_back(std::move(p));
    std::deque<std::unique_ptr<Pending>> none;
    break_world(failed, none, ended);  // also ends those started meanwhile
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (complete) ended.push_back(std::move(p));
    else if (p) incoming_.push_front(std::move(p));  // first in start order: the thread goes on with it
    caller_posting_ = false;
    handed_over = !incoming_.empty();
    if (handed_over) start_thread();
  }
  if (handed_over) wake_.notify_all();
  end(ended);
}

void MpiCollectives::end(std::deque<std::unique_ptr<Pending>>& ended) {
  for (auto& p : ended) {
    p->done(p->outcome);
    in_flight_.fetch_sub(1);
  }
  ended.clear();
}

Status MpiCollectives::begin(Pending& p) {
  p.begun = true;
  p.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) p.peers.push_back(r);
  }
  p.theirs.resize(p.peers.size());
  p.exchange.assign(2 * p.peers.size(), MPI_REQUEST_NULL);
  const int bytes = static_cast<int>(sizeof(Description));
  for (size_t i = 0; i < p.peers.size(); ++i) {
    KILN_RETURN_IF_ERROR(mpi_call_status(MPI_Irecv(&p.theirs[i], bytes, MPI_BYTE, p.peers[i], 0, check_, &p.exchange[i]),
                                    "MPI_Irecv for ", p.c));
    KILN_RETURN_IF_ERROR(mpi_call_status(
        MPI_Isend(&p.mine, bytes, MPI_BYTE, p.peers[i], 0, check_, &p.exchange[p.peers.size() + i]),
        "MPI_Isend for ", p.c));
  }
  return Status();
}

Status MpiCollectives::check_descriptions(const Pending& p) const {
  for (size_t i = 0; i < p.peers.size(); ++i) {
    if (p.theirs[i].agrees(p.mine)) continue;
    Description theirs = p.theirs[i];
    theirs.text[sizeof theirs.text - 1] = '\0';
    // The two calls in rank order, so that the message reads the same whichever rank reports it
    // (the first to fail ends the job, and the launcher may show only its message).
    const std::string own = "rank " + std::to_string(rank_) + " issued " + p.c.describe();
    std::string other = "rank " + std::to_string(p.peers[i]) + " issued " + theirs.text;
    if (theirs.number != p.mine.number) other += " as its collective #" + std::to_string(theirs.number);
    return failed_precondition_error("ranks issued different collectives at the same point (collective #" +
                                     std::to_string(p.mine.number) + " of rank " + std::to_string(rank_) +
                                     "): " + (rank_ < p.peers[i] ? own + ", " + other : other + ", " + own) +
                                     "; every rank must issue the same collectives in the same order");
  }
  return Status();
}

Status MpiCollectives::post(Pending& p) {
  const Collective& c = p.c;
  const int n = static_cast<int>(c.count);
  const char* what = "posting ";
  const bool reduces = c.kind == CollectiveKind::kAllreduce || c.kind == CollectiveKind::kReduceScatter;
  p.how = reduces ? combination_of(c) : Combination{c.type};
  const void* in = c.in;
  void* out = c.out;
  if (p.how.staged) {
    const int64_t in_count = c.kind == CollectiveKind::kReduceScatter ? c.count * size_ : c.count;
    KILN_ASSIGN_OR_RETURN(p.staged_in, staging_buffer(c, p.how.type, in_count));
    convert_elements(c.type, p.how.type, c.in, p.staged_in.data(), in_count);
    in = p.staged_in.data();
    if (c.kind == CollectiveKind::kReduceScatter) {
      KILN_ASSIGN_OR_RETURN(p.staged_out, staging_buffer(c, p.how.type, c.count));
      out = p.staged_out.data();
    } else {
      out = p.staged_in.data();
    }
  }
  const MPI_Datatype type = mpi_type(p.how.type);
  switch (c.kind) {
    case CollectiveKind::kAllreduce:
      return mpi_call_status(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, n, type, mpi_op(p.how.op), data_, &p.data),
                        what, c);
    case CollectiveKind::kAllgather:
      return mpi_call_status(MPI_Iallgather(c.in, n, type, c.out, n, type, data_, &p.data), what, c);
    case CollectiveKind::kReduceScatter:
      return mpi_call_status(MPI_Ireduce_scatter_block(in, out, n, type, mpi_op(p.how.op), data_, &p.data), what, c);
    case CollectiveKind::kBroadcast:
      if (rank_ == c.root && c.in != c.out && n > 0) std::memmove(c.out, c.in, c.count * ir::dtype_size(c.type));
      return mpi_call_status(MPI_Ibcast(c.out, n, type, c.root, data_, &p.data), what, c);
  }
  return internal_error(what + c.describe() + ": an unknown kind of collective");
}

Status MpiCollectives::timed_out(Pending& p) const {
  const std::string limit = std::to_string(static_cast<int64_t>(timeout_.count() + 0.5)) + " s";
  const std::string what = p.c.describe() + " (collective #" + std::to_string(p.mine.number) + " of rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  if (p.checked) {
    return deadline_exceeded_error(what + ": every rank arrived, but it did not complete within " + limit +
                                   " (KILN_COLLECTIVE_TIMEOUT); a rank may have died during it");
  }
  std::vector<int> missing;
  for (size_t i = 0; i < p.peers.size(); ++i) {
    int arrived = 0;
    MPI_Test(&p.exchange[i], &arrived, MPI_STATUS_IGNORE);
    if (!arrived) missing.push_back(p.peers[i]);
  }
  return deadline_exceeded_error(what + ": " + rank_list(missing) + " did not arrive within " + limit +
                                 " (KILN_COLLECTIVE_TIMEOUT)");
}

void MpiCollectives::break_world(const Status& why, std::deque<std::unique_ptr<Pending>>& in_flight,
                                 std::deque<std::unique_ptr<Pending>>& ended) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_.ok()) broken_ = why.annotate("an earlier collective failed");
    failed_ = true;
    // Started but not seen yet: they end too (their exchange was never posted).
    while (!incoming_.empty()) {
      in_flight.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  for (auto& p : in_flight) {
    if (p->outcome.ok()) p->outcome = why.annotate(p->c.describe() + ": not run, an earlier collective failed");
    ended.push_back(std::move(p));
  }
  in_flight.clear();
}

Status MpiCollectives::progress(Pending& p, bool earlier_unposted, bool& complete) {
  complete = false;
  if (!p.checked) {
    int exchanged = 0;
    KILN_RETURN_IF_ERROR(mpi_call_status(
        MPI_Testall(static_cast<int>(p.exchange.size()), p.exchange.data(), &exchanged, MPI_STATUSES_IGNORE),
        "exchanging descriptions for ", p.c));
    if (exchanged) {
      KILN_RETURN_IF_ERROR(check_descriptions(p));
      p.checked = true;
      agreed_.insert(p.mine.call());
    }
  }
  // A call the ranks agreed on before goes to MPI with its check; another one after it.
  if (!p.posted && !earlier_unposted && (p.checked || agreed_.count(p.mine.call()))) {
    KILN_RETURN_IF_ERROR(post(p));
    p.posted = true;
  }
  if (p.posted && !p.data_done && p.data_error.ok()) {
    int done = 0;
    p.data_error = mpi_call_status(MPI_Test(&p.data, &done, MPI_STATUS_IGNORE), "completing ", p.c);
    p.data_done = done != 0;
  }
  // Data posted before the check may fail because the ranks' calls differ: that says more.
  if (!p.data_error.ok() && p.checked) return p.data_error;
  if (p.checked && p.data_done) {
    if (p.c.kind == CollectiveKind::kAllreduce || p.c.kind == CollectiveKind::kReduceScatter) {
      void* combined = p.how.staged ? (p.staged_out.empty() ? p.staged_in.data() : p.staged_out.data()) : p.c.out;
      finish_combination(p.c, p.how, combined, size_);
    }
    complete = true;
    return Status();
  }
  if (Clock::now() > p.deadline) return p.data_error.ok() ? timed_out(p) : p.data_error;
  return Status();
}

bool MpiCollectives::advance(std::deque<std::unique_ptr<Pending>>& ended) {
  bool moved = false;
  bool earlier_unposted = false;  // collectives reach MPI in start order
  for (auto it = active_.begin(); it != active_.end();) {
    Pending& p = **it;
    bool complete = false;
    const bool was_checked = p.checked, was_posted = p.posted;
    if (Status failed = progress(p, earlier_unposted, complete); !failed.ok()) {
      p.outcome = failed;
      ended.push_back(std::move(*it));
      active_.erase(it);
      break_world(failed, active_, ended);
      return true;
    }
    moved = moved || complete || p.checked != was_checked || p.posted != was_posted;
    if (complete) {
      ended.push_back(std::move(*it));
      it = active_.erase(it);
      continue;
    }
    earlier_unposted = earlier_unposted || !p.posted;
    ++it;
  }
  return moved;
}

void MpiCollectives::main() {
  // Polls without pause for the first 200 µs of a wait, and for as long as a collective's data is
  // in flight (MPI progresses it only inside its calls; sched_yield between polls measured 15 µs
  // a collective here); while every collective waits for other ranks to arrive, backs off to naps
  // of up to a millisecond, so that waiting for a late rank costs little CPU. While a caller's
  // thread posts one (run_on_caller), this thread leaves MPI to it.
  auto idle_since = Clock::now();
  for (;;) {
    std::deque<std::unique_ptr<Pending>> ended;
    Status failed;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const bool moving = std::any_of(active_.begin(), active_.end(), [](const auto& p) { return p->posted; });
      const auto idle = Clock::now() - idle_since;
      auto woken = [&] { return stopping_ || (!incoming_.empty() && !caller_posting_); };
      if (active_.empty()) {
        wake_.wait(lock, woken);
      } else if (!moving && idle > std::chrono::microseconds(200)) {
        wake_.wait_for(lock, std::min<Clock::duration>(idle / 8, std::chrono::milliseconds(1)), woken);
      }
      if (stopping_) return;
      while (!incoming_.empty() && !caller_posting_ && failed.ok()) {
        active_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
        if (active_.back()->begun) continue;
        lock.unlock();
        failed = begin(*active_.back());
        lock.lock();
        idle_since = Clock::now();
      }
    }
    if (!failed.ok()) {
      active_.back()->outcome = failed;
      ended.push_back(std::move(active_.back()));
      active_.pop_back();
      break_world(failed, active_, ended);
    } else if (advance(ended)) {
      idle_since = Clock::now();
    }
    end(ended);
  }
}

}  // namespace kiln::ral::internal
