// The MPI world's collectives (world_mpi.cc): MPI's non-blocking collectives, posted and tested
// until they complete or time out, and each one's `done` run.
//
// Who calls MPI: a collective started while no other is in flight is posted by the thread that
// starts it (a queue's, running a routine's call step), which then tests it for up to
// kCallerPoll and, when it completed, runs `done` before start() returns: a small collective
// costs no hand-off between threads. Otherwise, and for what the caller's poll leaves unfinished,
// a progress thread of kiln's posts and tests. Only one of them calls MPI at a time.
//
// Every rank sends each other rank a short description of each call (its number in this
// process's sequence, kind, type, count, op, root and site) on a communicator of its own, and a
// collective completes only once every description has arrived and matches its own. So ranks that
// issue different collectives fail with a message naming both, and the ranks that never arrive
// are named when the timeout ends the wait. The data of a call whose description (all but its
// number) the ranks have agreed on before is posted with its description, so the check costs no
// round trip; a new one's data waits for the check. A mismatch found after the data was posted
// still fails the collective (and breaks the world), but MPI may have written its output.
// Collectives are posted to MPI in the order start() received them; several may be in flight at
// once. Private to kiln_ral; built only with MPI.
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "kiln/ral/world.h"

namespace kiln::ral::internal {

// OK for MPI_SUCCESS, else UNAVAILABLE: "WHAT: MPI's text for the code".
Status mpi_status(int code, std::string_view what);

class MpiCollectives {
 public:
  // `data` carries the collectives, `check` the descriptions; both are kiln's own communicators
  // over the same ranks, which the caller frees after this is destroyed. `timeout` in seconds.
  MpiCollectives(MPI_Comm data, MPI_Comm check, int rank, int size, double timeout_seconds);
  ~MpiCollectives();  // stop()
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;

  // World::start's contract; `c` is checked already.
  void start(Collective c, CollectiveDone done);
  // Stops the thread; later collectives fail. Collectives still in flight are abandoned, never
  // completed: their MPI requests cannot be cancelled, and their buffers may belong to drivers
  // already gone. Returns whether one was in flight or one failed: then MPI_Finalize would wait
  // for ranks that will not come, so kiln leaves MPI unfinalized.
  bool stop();

  struct Pending;  // one collective on its way (mpi_collectives.cc)

 private:
  using Clock = std::chrono::steady_clock;
  // How long a caller's thread tests the collective it posted before the progress thread takes
  // it over: a few round trips between ranks that arrive together.
  static constexpr std::chrono::microseconds kCallerPoll{50};

  void main();
  void start_thread();  // under mutex_
  // Posts and tests `p` on the calling thread (caller_posting_ is set), then runs its `done` or
  // hands it to the progress thread.
  void run_on_caller(std::unique_ptr<Pending> p);
  // Runs each one's `done` and counts it out of in_flight_.
  void end(std::deque<std::unique_ptr<Pending>>& ended);
  // Posts the description exchange; an error (MPI's) breaks the world.
  Status begin(Pending& p);
  // Moves `p` on as far as it goes without waiting: its descriptions checked once all arrived,
  // its data posted (not while `earlier_unposted`: MPI needs every rank's collectives in one
  // order), its completion seen. An error breaks the world.
  Status progress(Pending& p, bool earlier_unposted, bool& complete);
  // Advances every collective in flight; moves the ended ones to `ended`. Whether anything moved.
  bool advance(std::deque<std::unique_ptr<Pending>>& ended);
  Status check_descriptions(const Pending& p) const;
  Status post(Pending& p);
  Status timed_out(Pending& p) const;
  // The world is broken by `why`: every collective of `in_flight`, and those started and not yet
  // taken by the thread, end with it (into `ended`).
  void break_world(const Status& why, std::deque<std::unique_ptr<Pending>>& in_flight,
                   std::deque<std::unique_ptr<Pending>>& ended);

  MPI_Comm data_;
  MPI_Comm check_;
  int rank_;
  int size_;
  std::chrono::duration<double> timeout_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Pending>> incoming_;  // started, not yet seen by the thread
  std::deque<std::unique_ptr<Pending>> active_;    // the thread's own: in flight, in start order
  uint64_t started_ = 0;                           // collectives started so far: the next one's number
  std::atomic<uint64_t> in_flight_{0};             // started, `done` not yet run
  bool caller_posting_ = false;                    // a caller's thread owns MPI (run_on_caller)
  // The calls (Description::call) the ranks have agreed on: used only by whoever owns MPI.
  std::set<std::array<int64_t, 5>> agreed_;
  Status broken_;        // why later collectives fail at once
  bool failed_ = false;  // a collective failed (not merely stopped)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::ral::internal
