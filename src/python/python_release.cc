#include "python/python_release.h"

#include <mutex>
#include <utility>
#include <vector>

#include <Python.h>

namespace kiln::python {
namespace {

struct Queue {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> objects;
  bool call_pending = false;  // a pending call to release them is registered
};

// Never destroyed: a runtime thread may queue an object while the process exits.
Queue& queue() {
  static Queue* q = new Queue();
  return *q;
}

int release_pending_call(void*) {
  release_queued_objects();
  return 0;
}

void enqueue(std::shared_ptr<void> owned) {
  Queue& q = queue();
  bool register_call = false;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.objects.push_back(std::move(owned));
    register_call = !q.call_pending;
    q.call_pending = true;
  }
  // The interpreter may be finalizing: the objects then stay queued (Python frees nothing more).
  if (!register_call || !Py_IsInitialized()) return;
  // Needs neither the GIL nor a thread state. When the interpreter's queue of pending calls is
  // full, the next call into kiln releases the objects instead.
  if (Py_AddPendingCall(&release_pending_call, nullptr) != 0) {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.call_pending = false;
  }
}

}  // namespace

std::shared_ptr<void> released_by_python(std::shared_ptr<void> owned) {
  auto* held = new std::shared_ptr<void>(std::move(owned));
  return std::shared_ptr<void>(held, [](std::shared_ptr<void>* h) {
    enqueue(std::move(*h));
    delete h;
  });
}

void release_queued_objects() {
  std::vector<std::shared_ptr<void>> objects;
  {
    Queue& q = queue();
    std::lock_guard<std::mutex> lock(q.mutex);
    objects.swap(q.objects);
    q.call_pending = false;
  }
  objects.clear();  // here, with the GIL: finalizers may run Python code
}

}  // namespace kiln::python
