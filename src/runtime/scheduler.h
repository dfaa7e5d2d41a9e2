// Scheduler: per-node synchronization. Every routine and transfer goes on its stream through
// schedule(), which makes it wait for the stream's previous action and for exactly the actions
// of other streams it conflicts with on the arrays it touches:
//  - reading an array waits for its last writer;
//  - writing an array waits for its last writer and for its readers since then;
// so whenever scheduling a write precedes scheduling a read of the same array, the write also
// happens first, and the reverse for write-after-read, without blocking the host.
//
// All of the runtime's scheduling state (streams' counters, arrays' writers and readers, host
// copies) is guarded by one mutex: holding it is short (no device work, no waiting), and one
// lock keeps transfers between devices and streams free of lock-ordering questions.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "base/function_ref.h"
#include "kiln/hal/semaphore.h"
#include "runtime/device_array.h"

namespace kiln::runtime {

std::mutex& scheduling_mutex();

struct ArrayAccess {
  DeviceArray* array = nullptr;
  bool read = false;
  bool write = false;
};

struct ActionLabel {
  std::string_view name;      // for errors and the trace: "grad", "from_host w"
  std::string_view category;  // "routine" or "transfer"
  // Routines own the kShared arrays they write; transfers (uploads of the host copy) do not.
  bool takes_ownership = false;
};

// Submits the action with the waits and signals it is given (a HAL queue call).
using SubmitFn = FunctionRef<Status(const hal::SemaphoreList& waits, const hal::SemaphoreList& signals)>;

// Under scheduling_mutex(). Checks ownership of shared arrays, submits the action on `stream`
// after its previous action, the conflicting actions of `accesses` and `extra_waits`, and records
// it as the arrays' writer / reader. On an error nothing is submitted or recorded.
Result<StreamPoint> schedule(Stream& stream, std::span<const ArrayAccess> accesses,
                             const hal::SemaphoreList& extra_waits, ActionLabel label,
                             const SubmitFn& submit);

// Under scheduling_mutex(). Keeps `object` alive until `stream` has passed `point`.
void keep_alive_until(Stream& stream, const StreamPoint& point, std::shared_ptr<void> object);

}  // namespace kiln::runtime
