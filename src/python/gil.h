// Waiting without the GIL where Python may hold it: a destructor runs with the GIL when Python
// drops an object's last reference, and may wait for queued work that includes a custom call
// written in Python (kiln.register_call), which needs the GIL to run.
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::python {

// Runs `f`, without the GIL if this thread holds it.
template <typename F>
void without_gil(F&& f) {
  if (PyGILState_Check()) {
    nanobind::gil_scoped_release no_gil;
    f();
  } else {
    f();
  }
}

}  // namespace kiln::python
