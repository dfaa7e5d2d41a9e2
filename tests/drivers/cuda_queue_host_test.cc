// The CUDA queue's host side, without a GPU: CuContext, CuAllocator, CuQueue and (where NVRTC is
// present) CuCompiler run against a stand-in for the driver API that keeps "device" memory in
// host memory and runs each stream's work in order on a thread of its own, as a stream does.
// It checks what kiln does around CUDA: the order of an action's commands, pinned staging of
// reads and writes (a write's bytes are read when it is issued, a read's land after the copy),
// completions handed from the stream callback to the completion thread, status slots read back
// into a failure that names the kernel, host calls, failed waits, and that every call is made
// with the context pushed and none from inside a stream callback. What the stand-in cannot check
// is CUDA itself: that is for a machine with a GPU (docs/cuda.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_executable.h"
#include "drivers/cuda/cu_queue.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/hal/semaphore.h"

namespace kiln::cuda {
namespace {

// A stream: its work runs in order on its own thread.
class FakeStream {
 public:
  FakeStream() : thread_([this] { main(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back(std::move(work));
    ++pending_;
    ready_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void main() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;
      std::function<void()> work = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      work();
      lock.lock();
      if (--pending_ == 0) idle_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_, idle_;
  std::deque<std::function<void()>> work_;
  size_t pending_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// What the stand-in counts and checks, for the whole process (one test at a time).
struct Fake {
  static inline thread_local int depth = 0;           // contexts pushed on this thread
  static inline thread_local bool in_callback = false;  // inside a cuLaunchHostFunc callback
  static inline std::atomic<int> misuse{0};           // calls without a context, or from a callback
  static inline std::atomic<int> launches{0};
  static inline std::atomic<int> stream_waits{0};  // cuStreamWaitEvent calls
  static inline char context_object, module_object;
  // A latch that the next kernel launched while it is armed waits on, on its stream: holds that
  // stream's work back so that a test can submit more before it completes.
  static inline std::mutex latch_mutex;
  static inline std::condition_variable latch_open;
  static inline bool latch_armed = false, latch_closed = false;
  static void arm() {
    std::lock_guard<std::mutex> lock(latch_mutex);
    latch_armed = latch_closed = true;
  }
  static void release() {
    std::lock_guard<std::mutex> lock(latch_mutex);
    latch_closed = false;
    latch_open.notify_all();
  }
};

// A CUevent: recordings counted, completions counted as the stream reaches them.
struct FakeEvent {
  std::mutex mutex;
  std::condition_variable reached;
  uint64_t recorded = 0, completed = 0;
};

CUresult checked() {
  if (Fake::in_callback || Fake::depth == 0) {
    ++Fake::misuse;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

FakeStream* stream_of(CUstream s) { return reinterpret_cast<FakeStream*>(s); }
void* address(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
CUdeviceptr device_address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

// The kernels the fake module has: `fill_kernel` writes constant 0 into every u32 of binding 0
// (checks the parameters reach the launch), `fail_kernel` records failure code 7 in workgroup
// (2, 0, 0) through the status slot, as KILN_FAIL does.
enum class FakeKernel : uintptr_t { kFill = 1, kFail = 2, kCopy = 3, kGate = 4 };

// The status slot of (ring, tag), as the ABI computes it.
uint32_t* slot_of(CUdeviceptr ring, uint32_t tag) { return static_cast<uint32_t*>(address(ring)) + (tag % 256u) * 8u; }

const Api& fake_api() {
  static const Api api = [] {
    Api a{};
    a.CtxPushCurrent = [](CUcontext) {
      ++Fake::depth;
      return CUDA_SUCCESS;
    };
    a.CtxPopCurrent = [](CUcontext*) {
      --Fake::depth;
      return CUDA_SUCCESS;
    };
    a.GetErrorName = [](CUresult, const char** name) {
      *name = "CUDA_ERROR_FAKE";
      return CUDA_SUCCESS;
    };
    a.DevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) {
      *c = reinterpret_cast<CUcontext>(&Fake::context_object);
      return CUDA_SUCCESS;
    };
    a.DevicePrimaryCtxRelease = [](CUdevice) { return CUDA_SUCCESS; };
    a.EventCreate = [](CUevent* e, unsigned) {
      *e = reinterpret_cast<CUevent>(new FakeEvent());
      return checked();
    };
    a.EventDestroy = [](CUevent e) {
      delete reinterpret_cast<FakeEvent*>(e);
      return checked();
    };
    a.EventRecord = [](CUevent e, CUstream st) {
      auto* event = reinterpret_cast<FakeEvent*>(e);
      uint64_t generation = 0;
      {
        std::lock_guard<std::mutex> lock(event->mutex);
        generation = ++event->recorded;
      }
      stream_of(st)->push([event, generation] {
        std::lock_guard<std::mutex> lock(event->mutex);
        event->completed = std::max(event->completed, generation);
        event->reached.notify_all();
      });
      return checked();
    };
    a.StreamWaitEvent = [](CUstream st, CUevent e, unsigned) {
      ++Fake::stream_waits;
      auto* event = reinterpret_cast<FakeEvent*>(e);
      uint64_t target = 0;
      {
        std::lock_guard<std::mutex> lock(event->mutex);
        target = event->recorded;
      }
      stream_of(st)->push([event, target] {
        std::unique_lock<std::mutex> lock(event->mutex);
        event->reached.wait(lock, [&] { return event->completed >= target; });
      });
      return checked();
    };
    a.StreamCreate = [](CUstream* s, unsigned) {
      *s = reinterpret_cast<CUstream>(new FakeStream());
      return checked();
    };
    a.StreamDestroy = [](CUstream s) {
      delete stream_of(s);
      return checked();
    };
    a.StreamSynchronize = [](CUstream s) {
      stream_of(s)->synchronize();
      return checked();
    };
    a.LaunchHostFunc = [](CUstream s, CUhostFn fn, void* user) {
      stream_of(s)->push([fn, user] {
        Fake::in_callback = true;
        fn(user);
        Fake::in_callback = false;
      });
      return checked();
    };
    a.MemAlloc = [](CUdeviceptr* p, size_t bytes) {
      *p = device_address(std::calloc(1, bytes));
      return checked();
    };
    a.MemFree = [](CUdeviceptr p) {
      std::free(address(p));
      return checked();
    };
    a.MemHostAlloc = [](void** p, size_t bytes, unsigned) {
      *p = std::calloc(1, bytes);
      return checked();
    };
    a.MemFreeHost = [](void* p) {
      std::free(p);
      return checked();
    };
    a.MemHostGetDevicePointer = [](CUdeviceptr* d, void* p, unsigned) {
      *d = device_address(p);
      return checked();
    };
    a.MemHostRegister = [](void*, size_t, unsigned) { return checked(); };
    a.MemHostUnregister = [](void*) { return checked(); };
    a.MemcpyHtoDAsync = [](CUdeviceptr d, const void* s, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memcpy(address(d), s, n); });
      return checked();
    };
    a.MemcpyDtoHAsync = [](void* d, CUdeviceptr s, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memcpy(d, address(s), n); });
      return checked();
    };
    a.MemcpyDtoDAsync = [](CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memcpy(address(d), address(s), n); });
      return checked();
    };
    a.MemsetD8Async = [](CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
      stream_of(st)->push([=] { std::memset(address(d), v, n); });
      return checked();
    };
    a.MemsetD16Async = [](CUdeviceptr d, unsigned short v, size_t n, CUstream st) {
      stream_of(st)->push([=] { for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(address(d))[i] = v; });
      return checked();
    };
    a.MemsetD32Async = [](CUdeviceptr d, unsigned v, size_t n, CUstream st) {
      stream_of(st)->push([=] { for (size_t i = 0; i < n; ++i) static_cast<uint32_t*>(address(d))[i] = v; });
      return checked();
    };
    a.ModuleLoadData = [](CUmodule* m, const void*) {
      *m = reinterpret_cast<CUmodule>(&Fake::module_object);
      return checked();
    };
    a.ModuleUnload = [](CUmodule) { return checked(); };
    a.ModuleGetFunction = [](CUfunction* f, CUmodule, const char* name) {
      const std::string n = name;
      FakeKernel kernel = n == "fill_kernel" ? FakeKernel::kFill : n == "fail_kernel" ? FakeKernel::kFail
                          : n == "copy_kernel"  ? FakeKernel::kCopy : n == "kiln_wait_gate" ? FakeKernel::kGate
                                                : FakeKernel{};
      if (kernel == FakeKernel{}) return CUDA_ERROR_NOT_FOUND;
      *f = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(kernel));
      return checked();
    };
    a.FuncGetAttribute = [](int* v, CUfunction_attribute, CUfunction) {
      *v = 1024;
      return checked();
    };
    a.LaunchKernel = [](CUfunction f, unsigned gx, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream st, void** params, void**) {
      ++Fake::launches;
      // KILN_STATUS_PARAMS, then (base, offset, length) per binding, then the constants.
      const CUdeviceptr ring = *static_cast<CUdeviceptr*>(params[0]);
      const uint32_t tag = *static_cast<uint32_t*>(params[1]);
      const uint32_t command = *static_cast<uint32_t*>(params[2]);
      const auto kernel = static_cast<FakeKernel>(reinterpret_cast<uintptr_t>(f));
      std::function<void()> body;
      if (kernel == FakeKernel::kGate) {
        std::vector<std::pair<CUdeviceptr, uint32_t>> signallers;
        for (int i = 0; i < 4; ++i) {
          signallers.push_back({*static_cast<CUdeviceptr*>(params[3 + 2 * i]), *static_cast<uint32_t*>(params[4 + 2 * i])});
        }
        stream_of(st)->push([=] {
          for (auto [s, t] : signallers) {
            if (s && *static_cast<uint32_t*>(address(s)) == t) {
              slot_of(ring, tag)[1] = 0x7FFFFFFFu;
              slot_of(ring, tag)[0] = tag;
              return;
            }
          }
        });
        return checked();
      }
      if (kernel == FakeKernel::kFail) {
        body = [=] {
          uint32_t* slot = slot_of(ring, tag);
          slot[1] = 7;
          slot[2] = command;
          slot[3] = gx > 2 ? 2 : 0;
          slot[0] = tag;
        };
      } else {
        const CUdeviceptr base = *static_cast<CUdeviceptr*>(params[3]);
        const uint64_t offset = *static_cast<uint64_t*>(params[4]), length = *static_cast<uint64_t*>(params[5]);
        auto* data = reinterpret_cast<uint32_t*>(static_cast<char*>(address(base)) + offset);
        if (kernel == FakeKernel::kFill) {
          const uint32_t value = *static_cast<uint32_t*>(params[6]);
          body = [=] {
            for (uint64_t i = 0; i < length / 4; ++i) data[i] = value;
          };
        } else {
          auto* target = reinterpret_cast<uint32_t*>(static_cast<char*>(address(*static_cast<CUdeviceptr*>(params[6]))) +
                                                     *static_cast<uint64_t*>(params[7]));
          body = [=] { std::memcpy(target, data, length); };
        }
      }
      bool latched = false;
      {
        std::lock_guard<std::mutex> lock(Fake::latch_mutex);
        latched = Fake::latch_armed;
        Fake::latch_armed = false;
      }
      stream_of(st)->push([=] {
        if (latched) {
          std::unique_lock<std::mutex> lock(Fake::latch_mutex);
          Fake::latch_open.wait(lock, [] { return !Fake::latch_closed; });
        }
        if (slot_of(ring, tag)[0] == tag) return;  // KILN_ENTRY: the action already failed
        body();
      });
      return checked();
    };
    return a;
  }();
  return api;
}

class CudaQueueHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake::misuse = 0;
    CuDeviceRecord record;
    record.name = "fake";
    record.compute_major = 9;
    record.can_map_host_memory = true;
    record.info.name = "cuda:0";
    record.info.driver = "cuda";
    record.info.capabilities.executable_formats = {"cuda-c"};
    Result<std::shared_ptr<CuContext>> context = CuContext::create(fake_api(), record);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *context;
    allocator_ = std::make_unique<CuAllocator>(context_, this);
    Result<std::shared_ptr<CuQueue>> queue = CuQueue::create("q", this, context_);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *queue;
  }
  void TearDown() override {
    queue_.reset();
    allocator_.reset();
    executable_.reset();
    context_.reset();
    EXPECT_EQ(Fake::misuse.load(), 0) << "a CUDA call without the context pushed, or from a stream callback";
  }

  hal::BufferRef buffer(size_t bytes) {
    Result<hal::BufferRef> b = allocator_->allocate({}, bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nullptr;
  }
  static Status wait(const std::shared_ptr<hal::Semaphore>& s, uint64_t value) {
    return s->wait(value, Timeout::after_ms(10000));
  }

  std::shared_ptr<CuContext> context_;
  std::unique_ptr<CuAllocator> allocator_;
  std::shared_ptr<CuQueue> queue_;
  hal::ExecutableRef executable_;
};

TEST_F(CudaQueueHostTest, TransfersRunInOrderThroughStaging) {
  hal::BufferRef a = buffer(64), b = buffer(64);
  auto done = hal::Semaphore::create();
  std::vector<uint8_t> source(64), result(64, 0xEE);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i);
  const uint32_t pattern = 0xA1B2C3D4u;
  ASSERT_TRUE(queue_->write({}, {{done, 1}}, source.data(), a, 0, 64).ok());
  // The write's bytes were taken when it was issued: changing them now changes nothing.
  ASSERT_TRUE(wait(done, 1).ok());
  ASSERT_TRUE(queue_->copy({{done, 1}}, {{done, 2}}, a, 0, b, 0, 64).ok());
  ASSERT_TRUE(queue_->fill({{done, 2}}, {{done, 3}}, b, 8, 8, &pattern, 4).ok());
  ASSERT_TRUE(queue_->copy({{done, 3}}, {{done, 4}}, b, 0, b, 4, 32).ok());  // overlapping: a memmove
  ASSERT_TRUE(queue_->read({{done, 4}}, {{done, 5}}, b, 0, result.data(), 64).ok());
  ASSERT_TRUE(wait(done, 5).ok());
  std::vector<uint8_t> expected = source;
  std::memcpy(expected.data() + 8, &pattern, 4);
  std::memcpy(expected.data() + 12, &pattern, 4);
  std::memmove(expected.data() + 4, expected.data(), 32);
  EXPECT_EQ(result, expected);
}

TEST_F(CudaQueueHostTest, MisalignedFillAndUpdate) {
  hal::BufferRef a = buffer(32);
  Result<hal::BufferRef> odd = a->subspan(2, 16);
  ASSERT_TRUE(odd.ok());
  auto done = hal::Semaphore::create();
  const uint32_t zero = 0, pattern = 0x11223344u;
  ASSERT_TRUE(queue_->fill({}, {{done, 1}}, a, 0, 32, &zero, 4).ok());
  // The subspan starts 2 bytes in: cuMemsetD32Async cannot write there, the queue uploads.
  ASSERT_TRUE(queue_->fill({{done, 1}}, {{done, 2}}, *odd, 4, 8, &pattern, 4).ok());
  const uint8_t bytes[3] = {9, 8, 7};
  ASSERT_TRUE(queue_->update({{done, 2}}, {{done, 3}}, bytes, *odd, 0, 3).ok());
  std::vector<uint8_t> result(32);
  ASSERT_TRUE(queue_->read({{done, 3}}, {{done, 4}}, a, 0, result.data(), 32).ok());
  ASSERT_TRUE(wait(done, 4).ok());
  std::vector<uint8_t> expected(32, 0);
  std::memcpy(expected.data() + 6, &pattern, 4);
  std::memcpy(expected.data() + 10, &pattern, 4);
  std::memcpy(expected.data() + 2, bytes, 3);
  EXPECT_EQ(result, expected);
}

TEST_F(CudaQueueHostTest, HostCallsAndFailedWaits) {
  auto go = hal::Semaphore::create(), done = hal::Semaphore::create(), dropped = hal::Semaphore::create();
  std::atomic<int> calls{0};
  ASSERT_TRUE(queue_->host_call({{go, 1}}, {{done, 1}}, [&](const hal::SemaphoreList&) {
    ++calls;
    return Status();
  }).ok());
  hal::BufferRef a = buffer(16);
  uint32_t value = 5;
  // Waits for a semaphore that fails: the write never runs and its signal fails with the cause.
  ASSERT_TRUE(queue_->write({{go, 2}}, {{dropped, 1}}, &value, a, 0, 4).ok());
  EXPECT_TRUE(go->signal(1).ok());
  ASSERT_TRUE(wait(done, 1).ok());
  EXPECT_EQ(calls.load(), 1);
  go->fail(internal_error("the producer gave up"));
  Status failed = wait(dropped, 1);
  EXPECT_NE(failed.message().find("the producer gave up"), std::string::npos) << failed;
}

TEST_F(CudaQueueHostTest, DestroyingTheQueueCancelsWhatWaits) {
  auto never = hal::Semaphore::create(), done = hal::Semaphore::create();
  hal::BufferRef a = buffer(16);
  const uint32_t one = 1;
  ASSERT_TRUE(queue_->fill({{never, 1}}, {{done, 1}}, a, 0, 16, &one, 4).ok());
  queue_.reset();
  Status cancelled = wait(done, 1);
  EXPECT_EQ(cancelled.code(), StatusCode::kCancelled) << cancelled;
}

// Kernels: the compiler builds a real image with NVRTC (the stand-in's module ignores it and
// runs its own fill, fail and copy kernels).
class CudaQueueKernelTest : public CudaQueueHostTest {
 protected:
  void SetUp() override {
    if (Status nvrtc = nvrtc_available(); !nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc;
    CudaQueueHostTest::SetUp();
    if (HasFatalFailure()) return;
    Fake::stream_waits = 0;
    CuCompiler compiler(context_, DiskCache(""));
    hal::ExecutableSource source;
    source.format = "cuda-c";
    source.label = "fake_kernels";
    source.source =
        "extern \"C\" __global__ void fill_kernel(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_CONSTANT_PARAM(0)) {\n"
        "  KILN_ENTRY();\n"
        "}\n"
        "extern \"C\" __global__ void fail_kernel(KILN_STATUS_PARAMS) { KILN_FAIL(7); }\n"
        "extern \"C\" __global__ void copy_kernel(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1)) {\n"
        "  KILN_ENTRY();\n"
        "}\n";
    source.exports = {{"fill_kernel", 1, 1, true}, {"fail_kernel", 0, 0, false}, {"copy_kernel", 2, 0, false}};
    Result<hal::ExecutableRef> executable = compiler.compile(source, this);
    ASSERT_TRUE(executable.ok()) << executable.status();
    executable_ = *executable;
    Result<std::shared_ptr<CuQueue>> queue = CuQueue::create("q2", this, context_);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue2_ = *queue;
  }
  void TearDown() override {
    Fake::release();
    queue2_.reset();
    CudaQueueHostTest::TearDown();
  }
  hal::DispatchCommand fill(const hal::BufferRef& b, uint32_t value) const {
    hal::DispatchCommand d;
    d.executable = executable_;
    d.export_ordinal = 0;
    d.constants = {value};
    d.bindings = {{b, 0, b->byte_length()}};
    return d;
  }
  hal::DispatchCommand fail() const {
    hal::DispatchCommand d;
    d.executable = executable_;
    d.export_ordinal = 1;
    d.workgroups = {3, 1, 1};
    return d;
  }
  hal::DispatchCommand copy(const hal::BufferRef& from, const hal::BufferRef& to) const {
    hal::DispatchCommand d;
    d.executable = executable_;
    d.export_ordinal = 2;
    d.bindings = {{from, 0, from->byte_length()}, {to, 0, to->byte_length()}};
    return d;
  }
  std::vector<uint32_t> read(const hal::BufferRef& b) {
    std::vector<uint32_t> out(b->byte_length() / 4);
    auto done = hal::Semaphore::create();
    EXPECT_TRUE(queue_->read({}, {{done, 1}}, b, 0, out.data(), b->byte_length()).ok());
    EXPECT_TRUE(wait(done, 1).ok());
    return out;
  }

  std::shared_ptr<CuQueue> queue2_;
};

TEST_F(CudaQueueKernelTest, DispatchesReachTheKernelAndFailuresNameIt) {
  hal::BufferRef a = buffer(64);
  Result<hal::BufferRef> tail = a->subspan(16, 48);
  ASSERT_TRUE(tail.ok());
  auto done = hal::Semaphore::create(), failed = hal::Semaphore::create();
  hal::DispatchCommand part = fill(*tail, 0x5A5A5A5Au);
  part.bindings = {{*tail, 8, 16}};
  ASSERT_TRUE(queue_->dispatch({}, {{done, 1}}, part).ok());
  ASSERT_TRUE(wait(done, 1).ok());
  std::vector<uint32_t> result = read(a);
  for (size_t i = 0; i < result.size(); ++i) EXPECT_EQ(result[i], i >= 6 && i < 10 ? 0x5A5A5A5Au : 0u) << i;

  ASSERT_TRUE(queue_->dispatch({}, {{failed, 1}}, fail()).ok());
  Status status = wait(failed, 1);
  EXPECT_NE(status.message().find("kernel 'fail_kernel' failed with code 7 in workgroup (2, 0, 0)"), std::string::npos)
      << status;
  // A later action on the queue gets a slot of its own and succeeds.
  ASSERT_TRUE(queue_->dispatch({}, {{done, 2}}, part).ok());
  EXPECT_TRUE(wait(done, 2).ok());
}

// Device signal → device wait: the second queue's kernel waits on the first's event on the
// stream, submitted while the first has not even run, and still sees what it wrote.
TEST_F(CudaQueueKernelTest, DeviceWaitsBetweenQueuesSkipTheHost) {
  hal::BufferRef a = buffer(32), b = buffer(32);
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  Fake::arm();  // holds the first kernel back on its stream
  ASSERT_TRUE(queue_->dispatch({}, {{first, 1}}, fill(a, 42)).ok());
  ASSERT_TRUE(queue2_->dispatch({{first, 1}}, {{second, 1}}, copy(a, b)).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  EXPECT_EQ(second->wait(1, Timeout::after_ms(50)).code(), StatusCode::kDeadlineExceeded);
  Fake::release();
  ASSERT_TRUE(wait(second, 1).ok());
  Result<uint64_t> reached = first->query();
  ASSERT_TRUE(reached.ok()) << reached.status();
  EXPECT_EQ(*reached, 1u) << "the waiter completed before its signaller";
  EXPECT_EQ(read(b), std::vector<uint32_t>(8, 42));
}

// A transfer cannot fail on the device, so a wait on it needs no gate, whatever waits.
TEST_F(CudaQueueKernelTest, DeviceWaitsOnATransfer) {
  hal::BufferRef a = buffer(32), b = buffer(32);
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  const uint32_t three = 3;
  Fake::arm();
  ASSERT_TRUE(queue_->dispatch({}, {}, fill(a, 9)).ok());  // held back, and the fill behind it
  ASSERT_TRUE(queue_->fill({}, {{first, 1}}, b, 0, 32, &three, 4).ok());
  ASSERT_TRUE(queue2_->copy({{first, 1}}, {{second, 1}}, b, 0, a, 0, 16).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  Fake::release();
  ASSERT_TRUE(wait(second, 1).ok());
  EXPECT_EQ(read(a), (std::vector<uint32_t>{3, 3, 3, 3, 9, 9, 9, 9}));
}

// A failed kernel stops the kernels that wait for it on the device (through the gate): they
// write nothing, and their signals fail with the signaller's failure.
TEST_F(CudaQueueKernelTest, AFailedSignallerStopsItsDeviceWaiters) {
  hal::BufferRef a = buffer(32), b = buffer(32);
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  Fake::arm();
  ASSERT_TRUE(queue_->dispatch({}, {{first, 1}}, fail()).ok());
  ASSERT_TRUE(queue2_->dispatch({{first, 1}}, {{second, 1}}, fill(b, 5)).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1);
  Fake::release();
  Status status = wait(second, 1);
  EXPECT_NE(status.message().find("kernel 'fail_kernel' failed with code 7"), std::string::npos) << status;
  ASSERT_TRUE(queue2_->dispatch({}, {}, fill(a, 1)).ok());  // the queue goes on
  EXPECT_EQ(read(b), std::vector<uint32_t>(8, 0)) << "the waiter ran after its signaller failed";
}

}  // namespace
}  // namespace kiln::cuda
