// Stream: an in-order sequence of routines and transfers on one HAL queue (on the CPU, one
// worker), with its completion timeline and its merge buffer.
//
// A caller may rely on:
//  - what is scheduled on one stream runs in the order it was scheduled, one action at a time;
//    streams run concurrently with each other, ordered only by per-node synchronization;
//  - the first failure of an action fails the stream: await() returns it, and everything
//    scheduled after it fails with the same status (as a CUDA stream's sticky error);
//  - await() and is_idle() cover everything scheduled before the call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/hal/device.h"

namespace kiln::runtime {

class Stream;
struct StreamState;      // the runtime's bookkeeping (src/runtime/stream_state.h)
struct StreamInternals;  // how the runtime reaches it (same header)

// A point on a stream's timeline: done once the stream's semaphore reaches `at.value`.
struct StreamPoint {
  const Stream* stream = nullptr;  // identity only
  hal::SemaphoreValue at;
};

class Stream {
 public:
  Stream(hal::DeviceRef device, hal::QueueRef queue, std::string name, int ordinal);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const std::string& name() const { return name_; }
  int ordinal() const { return ordinal_; }  // among its backend's streams
  const hal::DeviceRef& device() const { return device_; }
  const hal::QueueRef& queue() const { return queue_; }
  const std::shared_ptr<hal::Semaphore>& timeline() const { return timeline_; }

  // Blocks until everything scheduled so far has completed, or the stream failed (its status),
  // or the timeout passed (DEADLINE_EXCEEDED).
  Status await(Timeout timeout = Timeout::infinite()) const;
  bool is_idle() const;
  // Makes what is scheduled on the stream after this call wait, without blocking the host, until
  // `semaphore` reaches `value` (a host event: data a host thread produces, a gate a test
  // opens). If the semaphore fails, the stream fails with its status.
  Status wait_for(const std::shared_ptr<hal::Semaphore>& semaphore, uint64_t value);

 private:
  friend struct StreamInternals;
  hal::DeviceRef device_;
  hal::QueueRef queue_;
  std::shared_ptr<hal::Semaphore> timeline_;
  std::string name_;
  int ordinal_;
  std::unique_ptr<StreamState> state_;
};

using StreamRef = std::shared_ptr<Stream>;

}  // namespace kiln::runtime
