// What the runtime keeps per stream, guarded by the scheduling mutex (runtime/scheduler.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "kiln/hal/buffer.h"
#include "kiln/runtime/stream.h"
#include "kiln/runtime/trace.h"

namespace kiln::runtime {

class DeviceArray;

struct StreamState {
  uint64_t last = 0;  // the timeline value of the last action scheduled

  // The merge buffer: grown as needed, and what it holds: a copy of `merge_node` in
  // `merge_buffer`, or (streaming) the source array itself.
  hal::BufferRef merge_buffer;
  std::string merge_node;  // empty: nothing
  std::shared_ptr<DeviceArray> merge_streaming_source;

  // Objects an action uses that the HAL does not hold (host staging memory), until its value.
  std::deque<std::pair<uint64_t, std::shared_ptr<void>>> keep_alive;

  std::shared_ptr<Trace> trace;  // set by the backend before anything is scheduled
};

// A stream's state is private to Stream, so that it is not part of the API; the runtime reaches
// it through here.
struct StreamInternals {
  static StreamState& state(const Stream& stream) { return *stream.state_; }
};

}  // namespace kiln::runtime
