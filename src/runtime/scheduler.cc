#include "runtime/scheduler.h"

#include <algorithm>

#include "kiln/base/time.h"
#include "runtime/stream_state.h"

namespace kiln::runtime {

std::mutex& scheduling_mutex() {
  static std::mutex mu;
  return mu;
}

namespace {

// Reached without failure: a wait on a failed semaphore must stay, so that the failure
// propagates to the waiting action.
bool reached(const StreamPoint& point) {
  Result<uint64_t> value = point.at.semaphore->query();
  return value.ok() && *value >= point.at.value;
}

// Adds a wait on `point` unless it is on `stream` (in order anyway) or already passed.
void add_wait(hal::SemaphoreList& waits, const Stream& stream, const StreamPoint& point) {
  if (point.stream == &stream || reached(point)) return;
  for (hal::SemaphoreValue& w : waits) {
    if (w.semaphore == point.at.semaphore) {
      w.value = std::max(w.value, point.at.value);
      return;
    }
  }
  waits.push_back(point.at);
}

void add_reader(DeviceArray& array, const StreamPoint& point) {
  for (StreamPoint& r : array.readers) {
    if (r.stream == point.stream) {
      r = point;
      return;
    }
  }
  array.readers.push_back(point);
}

Status check_owner(const DeviceArray& array, const Stream& stream) {
  if (array.desc.sharing != Sharing::kShared || !array.owner || array.owner == &stream) {
    return Status();
  }
  return failed_precondition_error(
      "node '" + array.desc.name + "' is shared across the streams of its device and owned by the " +
      "stream that first wrote it; stream '" + stream.name() +
      "' cannot write it (make the node per-stream, or write it on its owner stream)");
}

// Host calls around an action record when it ran on the stream.
struct TraceSpan {
  std::shared_ptr<Trace> trace;
  Trace::Event event;
};

}  // namespace

Result<StreamPoint> schedule(Stream& stream, std::span<const ArrayAccess> accesses,
                             const hal::SemaphoreList& extra_waits, ActionLabel label,
                             const SubmitFn& submit) {
  StreamState& state = StreamInternals::state(stream);
  for (const ArrayAccess& a : accesses) {
    if (a.write && label.takes_ownership) KILN_RETURN_IF_ERROR(check_owner(*a.array, stream));
  }
  hal::SemaphoreList waits;
  if (state.last > 0) waits.push_back({stream.timeline(), state.last});
  for (const hal::SemaphoreValue& w : extra_waits) {
    add_wait(waits, stream, StreamPoint{nullptr, w});
  }
  for (const ArrayAccess& a : accesses) {
    if (a.array->writer) add_wait(waits, stream, *a.array->writer);
    if (a.write) {
      for (const StreamPoint& r : a.array->readers) add_wait(waits, stream, r);
    }
  }

  uint64_t value = state.last;
  std::shared_ptr<TraceSpan> span;
  if (state.trace) {
    span = std::make_shared<TraceSpan>();
    span->trace = state.trace;
    span->event = {std::string(label.name), std::string(label.category), stream.name(),
                   stream.ordinal(), 0, 0, {}};
    KILN_RETURN_IF_ERROR(stream.queue()->host_call(waits, {{stream.timeline(), value + 1}},
                                                   [span](const hal::SemaphoreList&) {
                                                     span->event.begin_ns = now_ns();
                                                     return Status();
                                                   }));
    ++value;
    state.last = value;  // the host call is submitted; keep the timeline consistent on errors
    waits = {{stream.timeline(), value}};
  }
  KILN_RETURN_IF_ERROR(submit(waits, {{stream.timeline(), value + 1}}));
  ++value;
  state.last = value;
  if (span) {
    KILN_RETURN_IF_ERROR(stream.queue()->host_call({{stream.timeline(), value}},
                                                   {{stream.timeline(), value + 1}},
                                                   [span](const hal::SemaphoreList&) {
                                                     span->event.end_ns = now_ns();
                                                     span->trace->record(span->event);
                                                     return Status();
                                                   }));
    ++value;
    state.last = value;
  }

  const StreamPoint done{&stream, {stream.timeline(), value}};
  for (const ArrayAccess& a : accesses) {
    if (a.write) {
      a.array->writer = done;
      a.array->readers.clear();
      if (label.takes_ownership && a.array->desc.sharing == Sharing::kShared) a.array->owner = &stream;
    } else if (a.read) {
      add_reader(*a.array, done);
    }
  }
  // Drop what completed actions no longer need, now and then rather than on every call.
  if ((value & 15) == 0) {
    Result<uint64_t> reached = stream.timeline()->query();
    while (reached.ok() && !state.keep_alive.empty() && state.keep_alive.front().first <= *reached) {
      state.keep_alive.pop_front();
    }
  }
  return done;
}

void keep_alive_until(Stream& stream, const StreamPoint& point, std::shared_ptr<void> object) {
  StreamInternals::state(stream).keep_alive.emplace_back(point.at.value, std::move(object));
}

}  // namespace kiln::runtime
