// Python objects that kiln's runtime holds (memory bound as a tensor's array): released on a
// Python thread, never where the runtime drops them.
//
// The runtime may drop its last use of bound memory on any thread (a queue's thread, once the
// work that used it completes) and under its own locks. Releasing a Python object there would
// take the GIL, which the thread holding it may never give up while it waits for that very
// queue; and it could run Python code (a finalizer, a weakref callback) that calls kiln under
// kiln's locks. So the object is queued instead and released with the GIL at the interpreter's
// next pending-call check (Py_AddPendingCall) or at the next call into kiln that drains the queue.
#pragma once

#include <memory>

namespace kiln::python {

// A handle on `owned` (which may hold Python objects) for the runtime to hold: when its last
// copy goes, on whatever thread, `owned` is queued for release_queued_objects().
std::shared_ptr<void> released_by_python(std::shared_ptr<void> owned);

// With the GIL: releases what was queued (outside kiln's locks).
void release_queued_objects();

}  // namespace kiln::python
