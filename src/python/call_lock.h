// CallLock: one call at a time on an object that Python threads share (a compiled program).
//
// The lock is taken without the GIL. A thread that waited for it holding the GIL would stop the
// thread inside the call whenever that one needs the GIL back (to make its output arrays, to
// release a bound array, or to run a custom call written in Python): a deadlock. The mutex is
// recursive so that a call made on the same thread from inside a call (a finalizer run while an
// array is released, an __array__ that reads the program) goes through.
#pragma once

#include <mutex>

#include <nanobind/nanobind.h>

namespace kiln::python {

class CallLock {
 public:
  explicit CallLock(std::recursive_mutex& mutex) : lock_(mutex, std::try_to_lock) {
    if (!lock_.owns_lock()) {
      nanobind::gil_scoped_release no_gil;
      lock_.lock();
    }
  }

 private:
  std::unique_lock<std::recursive_mutex> lock_;
};

}  // namespace kiln::python
