// The MPI world's collectives (world_mpi.cc): a progress thread that posts MPI's non-blocking
// collectives, tests them until they complete or time out, and runs each one's `done`.
//
// Before a collective's data moves, every rank sends each other rank a short description of the
// call (its number in this process's sequence, kind, type, count, op, root and site) on a
// communicator of its own, and posts the collective only once every description has arrived and
// matches its own. So ranks that issue different collectives fail with a message naming both,
// and the ranks that never arrive are named when the timeout ends the wait. Collectives are
// posted to MPI in the order start() received them; several may be in flight at once.
// Private to kiln_ral; built only with MPI.
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
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
  void main();
  // Posts the description exchange; an error (MPI's) breaks the world.
  Status begin(Pending& p);
  // Advances every collective in flight; moves the ended ones to `ended`. Whether anything moved.
  bool advance(std::deque<std::unique_ptr<Pending>>& ended);
  Status check_descriptions(const Pending& p) const;
  Status post(Pending& p);
  Status timed_out(Pending& p) const;
  // The world is broken by `why`: every collective in flight ends with it.
  void break_world(const Status& why, std::deque<std::unique_ptr<Pending>>& ended);

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
  Status broken_;        // why later collectives fail at once
  bool failed_ = false;  // a collective failed (not merely stopped)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::ral::internal
