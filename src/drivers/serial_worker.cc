#include "drivers/serial_worker.h"

#include <exception>
#include <system_error>
#include <string>

#include "base/futex.h"
#include "kiln/base/time.h"
#include "kiln/hal/queue.h"

namespace kiln::drivers {

Status SerialWorker::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable()) return Status();
  try {
    thread_ = std::thread([this] { main(); });
  } catch (const std::system_error& e) {
    return resource_exhausted_error(std::string("cannot start a worker thread: ") + e.what());
  }
  return Status();
}

void SerialWorker::push(std::function<void()> task) {
  if (Status started = start(); !started.ok()) {
    task();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
  pushed_.fetch_add(1, std::memory_order_release);
  ready_.notify_one();
}

void SerialWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  pushed_.fetch_add(1, std::memory_order_release);  // ends a spin
  ready_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SerialWorker::main() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (tasks_.empty() && !stopping_ && spin_ns_ > 0) {
      const uint64_t seen = pushed_.load(std::memory_order_relaxed);
      lock.unlock();
      spin_for_task(seen);
      lock.lock();
    }
    ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and everything pushed has run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // what the task holds goes before the lock is taken again
    lock.lock();
  }
}

void SerialWorker::spin_for_task(uint64_t seen) {
  const int64_t until = now_ns() + spin_ns_;
  for (uint32_t step = 1; pushed_.load(std::memory_order_acquire) == seen && now_ns() < until; ++step) {
    spin_pause(step);
  }
}

void run_host_call(hal::Action& action) {
  auto& call = std::get<hal::HostCallCommand>(action.command);
  Status status;
  try {
    status = call.fn(action.signals);
  } catch (const std::exception& e) {
    status = internal_error(std::string("host call threw: ") + e.what());
  } catch (...) {
    status = internal_error("host call threw a non-standard exception");
  }
  if (status.code() != StatusCode::kDeferred) hal::Queue::complete(action, status);
}

}  // namespace kiln::drivers
