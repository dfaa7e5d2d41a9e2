// The CUDA queue's host side, without a GPU: CuContext, CuAllocator, CuQueue and (where NVRTC is
// present) CuCompiler run against a stand-in for the driver API (common/cuda_fake_api.h) that
// keeps "device" memory in host memory and runs each stream's work in order on a thread of its
// own, as a stream does.
// It checks what kiln does around CUDA: the order of an action's commands, pinned staging of
// reads and writes (a write's bytes are read when it is issued, a read's land after the copy),
// completions through events on the completion thread (and a sticky fault, which drops every
// completion CUDA has not reached, failing what is in flight instead of hanging), status slots read
// back into a failure that names the kernel, host calls, failed waits, and that every call is made
// with the context pushed. What the stand-in cannot check
// is CUDA itself: that is for a machine with a GPU (docs/cuda.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <cstring>
#include <vector>

#include "common/cuda_fake_api.h"
#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_executable.h"
#include "drivers/cuda/cu_queue.h"
#include "drivers/cuda/cu_status_slots.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/hal/semaphore.h"

namespace kiln::cuda {
namespace {

using namespace fake;  // NOLINT: the stand-in's names read as the driver's

class CudaQueueHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake::misuse = 0;
    Result<std::shared_ptr<CuContext>> context = CuContext::create(fake_api(), fake_record(memory_pools_));
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
    EXPECT_EQ(Fake::misuse.load(), 0) << "a CUDA call without the context pushed";
  }

  hal::BufferRef buffer(size_t bytes) {
    Result<hal::BufferRef> b = allocator_->allocate({}, bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nullptr;
  }
  // A buffer of zeros: the pool hands out blocks with the bytes their last user left, as CUDA's
  // does (the stand-in's too).
  hal::BufferRef zeroed(size_t bytes) {
    hal::BufferRef b = buffer(bytes);
    auto done = hal::Semaphore::create();
    const uint32_t zero = 0;
    EXPECT_TRUE(queue_->fill({}, {{done, 1}}, b, 0, bytes, &zero, 4).ok());
    EXPECT_TRUE(wait(done, 1).ok());
    return b;
  }
  static Status wait(const std::shared_ptr<hal::Semaphore>& s, uint64_t value) {
    return s->wait(value, Timeout::after_ms(10000));
  }

  std::shared_ptr<CuContext> context_;
  std::unique_ptr<CuAllocator> allocator_;
  std::shared_ptr<CuQueue> queue_;
  hal::ExecutableRef executable_;
  bool memory_pools_ = true;  // as on every GPU kiln supports (CUDA 11.2 and later)
};

// The same, on a device without memory pools.
class CudaQueueWithoutPoolsTest : public CudaQueueHostTest {
 protected:
  CudaQueueWithoutPoolsTest() { memory_pools_ = false; }
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

// A transfer larger than the staging pool's largest class goes through pooled blocks of that
// class, which stay for the next transfer, rather than through a one-off block freed after it.
// An overlapping copy goes through a temporary allocated and freed in stream order: no
// cuMemAlloc or cuMemFree, which would synchronize the whole device.
TEST_F(CudaQueueHostTest, OverlappingCopiesDoNotSynchronizeTheDevice) {
  hal::BufferRef a = buffer(64);
  auto done = hal::Semaphore::create();
  std::vector<uint8_t> bytes(64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  ASSERT_TRUE(queue_->write({}, {{done, 1}}, bytes.data(), a, 0, 64).ok());
  ASSERT_TRUE(wait(done, 1).ok());
  const int syncs = Fake::device_syncs;
  ASSERT_TRUE(queue_->copy({}, {{done, 2}}, a, 0, a, 8, 32).ok());
  ASSERT_TRUE(wait(done, 2).ok());
  EXPECT_EQ(Fake::device_syncs, syncs);
  std::vector<uint8_t> back(64);
  ASSERT_TRUE(queue_->read({}, {{done, 3}}, a, 0, back.data(), 64).ok());
  ASSERT_TRUE(wait(done, 3).ok());
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(back[i], i >= 8 && i < 40 ? i - 8 : i) << i;
}

// Buffers come from kiln's own memory pool (not the device's default one, which other libraries
// share) in stream order and go back to it the same way: neither cuMemAlloc nor cuMemFree, each
// of which waits for the whole device. The pool keeps a quarter of the device's memory between a
// free and the next allocation.
TEST_F(CudaQueueHostTest, BuffersAreAllocatedAndFreedWithoutSynchronizingTheDevice) {
  EXPECT_EQ(Fake::release_threshold.load(), uint64_t{20} << 30);
  EXPECT_EQ(Fake::threshold_pool.load(), context_->memory_pool());
  EXPECT_NE(context_->memory_pool(), default_pool());
  {
    hal::BufferRef b = buffer(64);
    EXPECT_EQ(Fake::last_pool.load(), context_->memory_pool());
  }
  const int syncs = Fake::device_syncs, allocations = Fake::async_allocations;
  {
    hal::BufferRef a = buffer(1 << 20), empty = buffer(0);
    auto done = hal::Semaphore::create();
    const uint32_t pattern = 7;
    ASSERT_TRUE(queue_->fill({}, {{done, 1}}, a, 0, 1 << 20, &pattern, 4).ok());
    ASSERT_TRUE(wait(done, 1).ok());
  }
  EXPECT_EQ(Fake::async_allocations - allocations, 2);
  EXPECT_EQ(Fake::device_syncs, syncs);
}

TEST_F(CudaQueueWithoutPoolsTest, BuffersFallBackToSynchronousAllocation) {
  const int syncs = Fake::device_syncs, allocations = Fake::async_allocations;
  { hal::BufferRef a = buffer(64); }
  EXPECT_EQ(Fake::async_allocations, allocations);
  EXPECT_EQ(Fake::device_syncs - syncs, 2);  // cuMemAlloc and cuMemFree
}

// Writes `length` bytes to a new buffer, then reads them back, each waited for.
void write_then_read(hal::Queue& queue, const hal::BufferRef& a, size_t length) {
  std::vector<uint8_t> source(length), result(length, 0xEE);
  for (size_t i = 0; i < length; ++i) source[i] = static_cast<uint8_t>(i * 131 + (i >> 20));
  auto done = hal::Semaphore::create();
  ASSERT_TRUE(queue.write({}, {{done, 1}}, source.data(), a, 0, length).ok());
  ASSERT_TRUE(done->wait(1, Timeout::after_ms(10000)).ok());
  ASSERT_TRUE(queue.read({{done, 1}}, {{done, 2}}, a, 0, result.data(), length).ok());
  ASSERT_TRUE(done->wait(2, Timeout::after_ms(10000)).ok());
  EXPECT_TRUE(result == source);
}

// A transfer of kDirectTransferBytes or more goes through the driver's own copy of the caller's
// memory: every byte arrives, both ways, and no staging block is pinned for it (a 10 GiB read
// once pinned 10 GiB).
TEST_F(CudaQueueHostTest, LongTransfersGoThroughTheDriversOwnCopy) {
  const size_t length = CuQueue::kDirectTransferBytes + 7;
  write_then_read(*queue_, buffer(length), length);
  EXPECT_EQ(context_->staging().allocated_blocks(), 0u);
}

// Shorter ones are staged in pooled chunks, all back in the pool at the end, where the read
// found the write's.
TEST_F(CudaQueueHostTest, TransfersAreStagedInPooledChunks) {
  const size_t chunk = std::min(CuQueue::kStagingChunkBytes, context_->staging().max_block_bytes());
  const size_t length = 3 * chunk - 5, blocks = 3;  // the last block of the chunk's class too
  ASSERT_LT(length, CuQueue::kDirectTransferBytes);
  write_then_read(*queue_, buffer(length), length);
  EXPECT_EQ(context_->staging().outstanding(), 0u);
  EXPECT_EQ(context_->staging().allocated_blocks(), blocks);
  EXPECT_EQ(context_->staging().cached_blocks(), blocks);
  EXPECT_EQ(context_->staging().cached_bytes(), blocks * chunk);
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

// Importing memory CUDA has registered already (the same array twice, a slice of it) shares the
// registration, which goes when the last buffer does; memory CUDA refuses to register (read-only
// pages) is imported as a copy rather than failing.
TEST_F(CudaQueueHostTest, ImportsShareRegistrations) {
  std::vector<uint32_t> host(64);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i);
  {
    Result<hal::BufferRef> whole = allocator_->import_host({}, host.data(), 256, nullptr);
    ASSERT_TRUE(whole.ok()) << whole.status();
    Result<hal::BufferRef> again = allocator_->import_host({}, host.data(), 256, nullptr);
    ASSERT_TRUE(again.ok()) << again.status();
    Result<hal::BufferRef> slice = allocator_->import_host({}, host.data() + 16, 64, nullptr);
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(cuda::buffer_pointer(**slice), cuda::buffer_pointer(**whole) + 64);
    EXPECT_EQ(Fake::registered.size(), 1u);
    whole->reset();
    again->reset();
    EXPECT_EQ(Fake::registered.size(), 1u) << "unregistered while the slice still uses it";
  }
  EXPECT_TRUE(Fake::registered.empty());
}

// What CUDA will not register writable never becomes a silent copy (which would miss the host's
// later writes): memory another library pinned is used through its mapping where one
// registration covers it whole, read-only pages are registered read-only, and the rest is
// refused with CUDA's reason.
TEST_F(CudaQueueHostTest, ImportsThatCudaRefusesAreNeverCopies) {
  std::vector<uint32_t> host(64);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i);
  const int allocations = Fake::async_allocations;
  // Pinned by another library: [0, 128) bytes.
  {
    ContextScope scope(context_->target());
    ASSERT_EQ(fake_api().MemHostRegister(host.data(), 128, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
  }
  {
    Result<hal::BufferRef> inside = allocator_->import_host({}, host.data() + 8, 64, nullptr);
    ASSERT_TRUE(inside.ok()) << inside.status();
    EXPECT_EQ(cuda::buffer_pointer(**inside), device_address(host.data() + 8));
    Result<hal::BufferRef> across = allocator_->import_host({}, host.data() + 16, 128, nullptr);
    ASSERT_FALSE(across.ok());
    EXPECT_EQ(across.status().code(), StatusCode::kFailedPrecondition) << across.status();
    EXPECT_NE(across.status().message().find("outside kiln covers part of it"), std::string::npos) << across.status();
  }
  EXPECT_EQ(Fake::registered.size(), 1u) << "kiln unregistered what another library registered";
  {
    ContextScope scope(context_->target());
    ASSERT_EQ(fake_api().MemHostUnregister(host.data()), CUDA_SUCCESS);
  }
  // Read-only pages.
  Fake::read_only[reinterpret_cast<uintptr_t>(host.data())] = 256;
  {
    Result<hal::BufferRef> read_only = allocator_->import_host({}, host.data(), 256, nullptr);
    ASSERT_TRUE(read_only.ok()) << read_only.status();
    EXPECT_TRUE(Fake::last_register_flags & CU_MEMHOSTREGISTER_READ_ONLY);
    EXPECT_EQ(cuda::buffer_pointer(**read_only), device_address(host.data()));
  }
  Fake::read_only.clear();
  EXPECT_TRUE(Fake::registered.empty());
  // Refused outright.
  Fake::refuse_registration = true;
  Result<hal::BufferRef> refused = allocator_->import_host({}, host.data(), 256, nullptr);
  Fake::refuse_registration = false;
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("cuMemHostRegister: CUDA_ERROR_NOT_SUPPORTED"), std::string::npos) << refused.status();
  EXPECT_EQ(Fake::async_allocations, allocations) << "a device copy was made";
}

// Memory whose address left kiln (DLPack, another library) is not handed out again while a
// consumer's work on a stream of its own may still read it. Here the consumer's "kernel" waits
// behind a gate and then reads the exported bytes; kiln drops the buffer and allocates one of
// the same size, which the pool gives the same block, and writes it. The gate opens once kiln
// waits for the whole context (the fix) or once kiln has written the reused block (the bug).
TEST_F(CudaQueueHostTest, ExportedMemoryIsNotReusedWhileAnotherStreamMayReadIt) {
  hal::BufferRef a = buffer(64);
  auto done = hal::Semaphore::create();
  const std::vector<uint8_t> ones(64, 1), twos(64, 2);
  // Written in place (the stand-in's device memory is host memory), not by a queue action, whose
  // flight the completion thread may still hold when the test drops `a`.
  std::memcpy(address(buffer_pointer(*a)), ones.data(), 64);
  const CUdeviceptr exported = a->storage()->native_memory().device_address;
  CUstream consumer = nullptr;
  {
    ContextScope scope(context_->target());
    ASSERT_EQ(fake_api().StreamCreate(&consumer, 0), CUDA_SUCCESS);
  }
  std::mutex gate_mutex;
  std::condition_variable gate;
  bool open = false, reused = false;
  std::vector<uint8_t> seen(64, 0xEE);
  stream_of(consumer)->push([&] {
    std::unique_lock<std::mutex> lock(gate_mutex);
    gate.wait(lock, [&] { return open; });
    std::memcpy(seen.data(), address(exported), 64);
  });
  const int syncs = Fake::context_syncs;
  CUdeviceptr again = 0;
  std::thread kiln([&] {
    a.reset();  // the last reference: the memory goes back to the pool
    hal::BufferRef b = buffer(64);
    again = buffer_pointer(*b);
    EXPECT_TRUE(queue_->write({}, {{done, 1}}, twos.data(), b, 0, 64).ok());
    EXPECT_TRUE(wait(done, 1).ok());
    std::lock_guard<std::mutex> lock(Fake::context_sync_mutex);
    reused = true;
    Fake::context_sync.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(Fake::context_sync_mutex);
    Fake::context_sync.wait(lock, [&] { return reused || Fake::context_syncs > syncs; });
  }
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    open = true;
  }
  gate.notify_all();
  kiln.join();
  stream_of(consumer)->synchronize();
  EXPECT_EQ(again, exported) << "the pool did not hand the block out again: the test shows nothing";
  EXPECT_EQ(seen, ones) << "the consumer read bytes kiln wrote after it gave the memory back";
  EXPECT_GT(Fake::context_syncs, syncs);
  ContextScope scope(context_->target());
  EXPECT_EQ(fake_api().StreamDestroy(consumer), CUDA_SUCCESS);
}

// An allocation that finds the device out of memory trims kiln's pool (giving its freed blocks
// back) and tries once more.
TEST_F(CudaQueueHostTest, OutOfMemoryTrimsThePoolAndTriesOnceMore) {
  const int trims = Fake::pool_trims;
  Fake::out_of_memory = true;
  hal::BufferRef b = buffer(4096);
  EXPECT_TRUE(b);
  EXPECT_EQ(Fake::pool_trims - trims, 1);
  Fake::out_of_memory = false;
}

// A buffer that never left kiln goes back to the pool without waiting for the device.
TEST_F(CudaQueueHostTest, UnexportedMemoryIsFreedWithoutWaitingForTheContext) {
  const int syncs = Fake::context_syncs;
  { hal::BufferRef a = buffer(64); }
  EXPECT_EQ(Fake::context_syncs, syncs);
}

// A new arena of status slots is zeroed in stream order before any action uses it, although the
// pool gives it a block whose bytes another allocation left: a stale word there would read as a
// finished (or failed) action. The recycled block here holds 0xFF in every byte.
TEST_F(CudaQueueHostTest, ANewArenaOfStatusSlotsIsZeroedInStreamOrder) {
  constexpr size_t kArena = size_t{kStatusSlots} * kStatusWords * sizeof(uint32_t);
  // Hold every free slot (the queue may hold some of the first arena's).
  std::vector<std::shared_ptr<const StatusSlot>> held;
  CUdeviceptr last_ring = 0;
  for (uint32_t i = 0; i < kStatusSlots; ++i) {
    Result<std::shared_ptr<const StatusSlot>> slot = context_->slots().acquire();
    ASSERT_TRUE(slot.ok()) << slot.status();
    last_ring = (*slot)->ring;
    held.push_back(*slot);
  }
  // A block of an arena's size, dirtied (all bytes 0xFF) and given back to the pool.
  CUdeviceptr dirty_block = 0;
  {
    hal::BufferRef dirty = buffer(kArena);
    dirty_block = buffer_pointer(*dirty);
    std::memset(address(dirty_block), 0xFF, kArena);
  }
  // Slots until one comes from a new arena.
  std::shared_ptr<const StatusSlot> fresh;
  for (uint32_t i = 0; i < 2 * kStatusSlots && !fresh; ++i) {
    Result<std::shared_ptr<const StatusSlot>> slot = context_->slots().acquire();
    ASSERT_TRUE(slot.ok()) << slot.status();
    if ((*slot)->ring != last_ring) fresh = *slot;
    held.push_back(*slot);
  }
  ASSERT_TRUE(fresh);
  ASSERT_EQ(fresh->ring, dirty_block) << "the pool did not give the new arena the dirtied block: the test shows nothing";
  const auto* ring = static_cast<const uint8_t*>(address(fresh->ring));
  EXPECT_TRUE(std::all_of(ring, ring + kArena, [](uint8_t b) { return b == 0; }))
      << "the new arena holds the bytes the pool's block had";
}

// Kernels: the compiler builds a real image with NVRTC (the stand-in's module ignores it and
// runs its own fill, fail and copy kernels).
constexpr uint32_t kOne = 1;

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
        "}\n"
        "extern \"C\" __global__ void trap_kernel(KILN_STATUS_PARAMS) { __trap(); }\n";
    source.exports = {{"fill_kernel", 1, 1, true},
                      {"fail_kernel", 0, 0, false},
                      {"copy_kernel", 2, 0, false},
                      {"trap_kernel", 0, 0, false}};
    Result<hal::ExecutableRef> executable = compiler.compile(source, this);
    ASSERT_TRUE(executable.ok()) << executable.status();
    executable_ = *executable;
    // The same kernels, fill_kernel and copy_kernel said not to fail (as kiln's code generator says
    // of kernels without checks), fill_kernel to need 32 bytes.
    source.exports[0].may_fail = false;
    source.exports[0].binding_min_bytes = {32};
    source.exports[2].may_fail = false;
    executable = compiler.compile(source, this);
    ASSERT_TRUE(executable.ok()) << executable.status();
    quiet_executable_ = *executable;
    Result<std::shared_ptr<CuQueue>> queue = CuQueue::create("q2", this, context_);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue2_ = *queue;
  }
  void TearDown() override {
    Fake::release();
    quiet_executable_.reset();
    queue2_.reset();
    CudaQueueHostTest::TearDown();
    Fake::clear_fault();
  }
  hal::DispatchCommand trap() const {
    hal::DispatchCommand d;
    d.executable = executable_;
    d.export_ordinal = 3;
    return d;
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

  // A kernel that prints (as a value-traced one does).
  static hal::ExecutableSource printing_source() {
    hal::ExecutableSource source;
    source.format = "cuda-c";
    source.label = "printing";
    source.source =
        "extern \"C\" __global__ void print_kernel(KILN_STATUS_PARAMS) { KILN_ENTRY(); printf(\"tag %u\\n\", kiln_tag); }\n";
    source.exports = {{"print_kernel", 0, 0, false}};
    return source;
  }

  // Holds queue_'s stream back (a latched kernel that fills `a` with 9, until Fake::release) and
  // puts behind it a fill of `b` with 3 that signals `first` = 1: a transfer, whose signal a
  // waiter on queue2_ has handed to the device.
  void hold_a_transfer(const hal::BufferRef& a, const hal::BufferRef& b, const std::shared_ptr<hal::Semaphore>& first) {
    const uint32_t three = 3;
    Fake::arm();
    ASSERT_TRUE(queue_->dispatch({}, {}, fill(a, 9)).ok());
    ASSERT_TRUE(queue_->fill({}, {{first, 1}}, b, 0, 32, &three, 4).ok());
  }

  std::shared_ptr<CuQueue> queue2_;
  hal::ExecutableRef quiet_executable_;
};

// A long read lands in the caller's memory before its action ends, so it waits for its waits on
// the host: here a transfer held back behind a latched kernel, whose signal a short read would
// have handed to the stream.
TEST_F(CudaQueueKernelTest, ALongReadWaitsForItsWaitsOnTheHost) {
  const size_t length = CuQueue::kDirectTransferBytes + 8;
  hal::BufferRef a = zeroed(64), b = zeroed(length);
  auto first = hal::Semaphore::create(), done = hal::Semaphore::create();
  hold_a_transfer(a, b, first);
  const int handed = Fake::stream_waits;
  std::vector<uint8_t> result(length, 0xEE);
  ASSERT_TRUE(queue2_->read({{first, 1}}, {{done, 1}}, b, 0, result.data(), length).ok());
  Fake::release();
  ASSERT_TRUE(wait(done, 1).ok());
  EXPECT_EQ(Fake::stream_waits.load(), handed) << "the long read's wait was handed to the stream";
  for (size_t i = 0; i < 32; ++i) ASSERT_EQ(result[i], i % 4 == 0 ? 3 : 0) << i;
  EXPECT_EQ(result[length - 1], 0);
}

TEST_F(CudaQueueKernelTest, DispatchesReachTheKernelAndFailuresNameIt) {
  hal::BufferRef a = zeroed(64);
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

// CUDA flushes device printf at a synchronization such as cuEventSynchronize, not at a query: an
// action whose kernels print is waited for in cuEventSynchronize, with no spin on cuEventQuery
// first; any other action is polled first.
TEST_F(CudaQueueKernelTest, AnActionThatPrintsIsFlushedBeforeItSignals) {
  Fake::extra_kernels["print_kernel"] = [](void**, unsigned, unsigned) { return std::function<void()>([] {}); };
  CuCompiler compiler(context_, DiskCache(""));
  const hal::ExecutableSource source = printing_source();
  Fake::printf_buffer = size_t{1} << 20;
  Result<hal::ExecutableRef> printing = compiler.compile(source, this);
  ASSERT_TRUE(printing.ok()) << printing.status();
  EXPECT_EQ(Fake::printf_buffer, CuCompiler::kPrintfBufferBytes) << "the printf buffer was left at CUDA's 1 MiB";
  hal::BufferRef a = buffer(16);
  auto done = hal::Semaphore::create();
  int queries = Fake::event_queries;
  ASSERT_TRUE(queue_->dispatch({}, {{done, 1}}, fill(a, 7)).ok());
  ASSERT_TRUE(wait(done, 1).ok());
  EXPECT_GT(Fake::event_queries, queries) << "a kernel that does not print is polled first";
  hal::DispatchCommand print;
  print.executable = *printing;
  queries = Fake::event_queries;
  const int syncs = Fake::event_syncs;
  ASSERT_TRUE(queue_->dispatch({}, {{done, 2}}, print).ok());
  ASSERT_TRUE(wait(done, 2).ok());
  EXPECT_EQ(Fake::event_queries, queries) << "an action that prints was polled, which does not flush printf";
  EXPECT_EQ(Fake::event_syncs, syncs + 1);
  Fake::extra_kernels.erase("print_kernel");  // the launches above used its address
}

// After another library's kernel printed, CUDA refuses to resize the printf buffer: a program
// that prints still compiles (with a warning) and keeps the buffer there is.
TEST_F(CudaQueueKernelTest, APrintingProgramAfterAnotherLibrarysPrintfKeepsTheBuffer) {
  Fake::extra_kernels["print_kernel"] = [](void**, unsigned, unsigned) { return std::function<void()>([] {}); };
  CuCompiler compiler(context_, DiskCache(""));
  Fake::printf_buffer = size_t{1} << 20;
  Fake::printf_ran = true;
  Result<hal::ExecutableRef> printing = compiler.compile(printing_source(), this);
  Fake::printf_ran = false;
  EXPECT_TRUE(printing.ok()) << printing.status();
  EXPECT_EQ(Fake::printf_buffer, size_t{1} << 20);
  Fake::extra_kernels.erase("print_kernel");
}

// Grids past CUDA's limits (y and z at most 65535) fail the action with a status that says so,
// before cuLaunchKernel would fail with a bare CUDA_ERROR_INVALID_VALUE.
TEST_F(CudaQueueKernelTest, GridsPastTheLaunchLimitsFailClearly) {
  hal::BufferRef a = buffer(32);
  auto done = hal::Semaphore::create();
  hal::DispatchCommand tall = fill(a, 1);
  tall.workgroups = {1, 65536, 1};
  const int launches = Fake::launches;
  ASSERT_TRUE(queue_->dispatch({}, {{done, 1}}, tall).ok());
  Status status = wait(done, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("1 x 65536 x 1 workgroups exceed CUDA's grid limits"), std::string::npos) << status;
  EXPECT_EQ(Fake::launches, launches);
}

// A fault in a kernel is sticky and CUDA drops every completion it has not reached: the action,
// the ones queued behind it on both queues and every later submission fail, naming the fault,
// within the wait's timeout; and the queues can still be destroyed.
TEST_F(CudaQueueKernelTest, AFaultFailsEverythingInFlightAndAfter) {
  hal::BufferRef a = buffer(32);
  auto faulted = hal::Semaphore::create(), behind = hal::Semaphore::create(), other = hal::Semaphore::create();
  Fake::arm();  // holds the trap back until everything below is on the streams
  ASSERT_TRUE(queue_->dispatch({}, {{faulted, 1}}, trap()).ok());
  ASSERT_TRUE(queue_->dispatch({}, {{behind, 1}}, fill(a, 3)).ok());
  ASSERT_TRUE(queue2_->dispatch({{faulted, 1}}, {{other, 1}}, fill(a, 4)).ok());
  Fake::release();
  for (const auto& s : {faulted, behind, other}) {
    Status status = wait(s, 1);
    EXPECT_EQ(status.code(), StatusCode::kInternal) << status;
    EXPECT_NE(status.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << status;
  }
  // Later work fails at once, on either queue, with the same device-lost status.
  auto later = hal::Semaphore::create();
  ASSERT_TRUE(queue2_->fill({}, {{later, 1}}, a, 0, 32, &kOne, 4).ok());
  Status lost = wait(later, 1);
  EXPECT_NE(lost.message().find("cuda:0 is lost"), std::string::npos) << lost;
  EXPECT_NE(lost.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << lost;
  queue_.reset();  // returns: nothing waits for a completion that will never come
  queue2_.reset();
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
  ASSERT_NO_FATAL_FAILURE(hold_a_transfer(a, b, first));
  ASSERT_TRUE(queue2_->copy({{first, 1}}, {{second, 1}}, b, 0, a, 0, 16).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  Fake::release();
  ASSERT_TRUE(wait(second, 1).ok());
  EXPECT_EQ(read(a), (std::vector<uint32_t>{3, 3, 3, 3, 9, 9, 9, 9}));
}

// A read whose wait was handed to the device, and which then failed on the host (another action
// failed the semaphore), fails and leaves the caller's memory as it was, although the device
// went on to copy.
TEST_F(CudaQueueKernelTest, AReadWhoseHandedWaitFailsWritesNothing) {
  hal::BufferRef a = buffer(32), b = buffer(32);
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  ASSERT_NO_FATAL_FAILURE(hold_a_transfer(a, b, first));
  std::vector<uint32_t> out(8, 0xEEEEEEEEu);
  ASSERT_TRUE(queue2_->read({{first, 1}}, {{second, 1}}, b, 0, out.data(), 32).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  first->fail(internal_error("the signaller's producer failed"));
  Fake::release();
  Status read = wait(second, 1);
  EXPECT_FALSE(read.ok());
  EXPECT_NE(read.message().find("the signaller's producer failed"), std::string::npos) << read;
  // The read's signal failed as soon as its wait did; its device part ends before the next
  // action of its queue completes (the queue's completions run in order).
  auto third = hal::Semaphore::create();
  const uint32_t three = 3;
  ASSERT_TRUE(queue2_->fill({}, {{third, 1}}, b, 0, 4, &three, 4).ok());
  ASSERT_TRUE(wait(third, 1).ok());
  EXPECT_EQ(out, std::vector<uint32_t>(8, 0xEEEEEEEEu)) << "a failed read wrote the caller's memory";
}

// A failed kernel stops the kernels that wait for it on the device (through the gate): they
// write nothing, and their signals fail with the signaller's failure.
TEST_F(CudaQueueKernelTest, AFailedSignallerStopsItsDeviceWaiters) {
  hal::BufferRef a = buffer(32), b = zeroed(32);
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

// Kernels that cannot fail (hal::ExportInfo::may_fail false, as kiln's code generator says of
// kernels without checks) get no status slot: nothing is copied back after them, and a kernel
// that waits for them on another queue is handed the wait without a gate. A dispatch binding
// fewer bytes than the kernel's entry check asks for gets a slot, and a kernel that may fail
// (the default) too.
TEST_F(CudaQueueKernelTest, KernelsThatCannotFailReadNoStatusBack) {
  auto quiet_fill_of = [&](const hal::BufferRef& b, uint32_t value) {
    hal::DispatchCommand d = fill(b, value);
    d.executable = quiet_executable_;
    return d;
  };
  hal::BufferRef a = buffer(32), b = zeroed(32), small = buffer(16);
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  const int reads = Fake::device_to_host, gates = Fake::gate_launches;
  Fake::arm();
  ASSERT_TRUE(queue_->dispatch({}, {{first, 1}}, quiet_fill_of(a, 6)).ok());
  ASSERT_TRUE(queue2_->dispatch({{first, 1}}, {{second, 1}}, copy(a, b)).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  EXPECT_EQ(Fake::gate_launches.load(), gates) << "a wait on kernels that cannot fail was gated";
  Fake::release();
  ASSERT_TRUE(wait(second, 1).ok());
  EXPECT_EQ(Fake::device_to_host.load(), reads + 1) << "only the copy's status slot is read back";
  EXPECT_EQ(read(b), std::vector<uint32_t>(8, 6));
  const int before_small = Fake::device_to_host;
  ASSERT_TRUE(queue_->dispatch({}, {{first, 2}}, quiet_fill_of(small, 1)).ok());
  ASSERT_TRUE(wait(first, 2).ok());
  EXPECT_EQ(Fake::device_to_host.load(), before_small + 1) << "a binding below the entry check's size has no slot";
  const int before_fallible = Fake::device_to_host;
  ASSERT_TRUE(queue_->dispatch({}, {{first, 3}}, fill(a, 2)).ok());
  ASSERT_TRUE(wait(first, 3).ok());
  EXPECT_EQ(Fake::device_to_host.load(), before_fallible + 1) << "a kernel that may fail has no slot";
}

// Routines as CUDA graphs: a command buffer of kernels that cannot fail is launched kernel by
// kernel on its first run and replayed as one graph from its second; another command buffer of
// the same kernels (a routine recorded again for other buffers) replays the same graph with the
// nodes that differ updated, and so does the first again. Kernels that may fail are never graphs.
TEST_F(CudaQueueKernelTest, CommandBuffersThatRunAgainAreReplayedAsGraphs) {
  auto record = [&](const hal::ExecutableRef& executable, const hal::BufferRef& from, const hal::BufferRef& to,
                    uint32_t value) {
    auto buffer = hal::CommandBuffer::create(this);
    hal::DispatchCommand filling = fill(from, value), copying = copy(from, to);
    filling.executable = copying.executable = executable;
    EXPECT_TRUE(buffer->dispatch(filling).ok());
    EXPECT_TRUE(buffer->barrier().ok());
    EXPECT_TRUE(buffer->dispatch(copying).ok());
    EXPECT_TRUE(buffer->finalize().ok());
    return std::shared_ptr<const hal::CommandBuffer>(buffer);
  };
  auto done = hal::Semaphore::create();
  uint64_t n = 0;
  auto run = [&](const std::shared_ptr<const hal::CommandBuffer>& buffer, const hal::BufferRef& out) {
    const uint32_t zero = 0;
    EXPECT_TRUE(queue_->fill({}, {{done, ++n}}, out, 0, out->byte_length(), &zero, 4).ok());
    EXPECT_TRUE(queue_->execute({{done, n}}, {{done, n + 1}}, buffer).ok());
    ++n;
    EXPECT_TRUE(wait(done, n).ok());
    return read(out);
  };
  hal::BufferRef a = buffer(32), b = buffer(32), c = buffer(32), d = buffer(32);
  const auto first = record(quiet_executable_, a, b, 5), second = record(quiet_executable_, c, d, 7);
  const int launches = Fake::launches, graphs = Fake::graph_launches, updates = Fake::graph_node_updates;
  EXPECT_EQ(run(first, b), std::vector<uint32_t>(8, 5));
  EXPECT_EQ(Fake::launches.load(), launches + 2) << "the first run launches its kernels";
  EXPECT_EQ(Fake::graph_launches.load(), graphs);
  EXPECT_EQ(run(first, b), std::vector<uint32_t>(8, 5));
  EXPECT_EQ(run(first, b), std::vector<uint32_t>(8, 5));
  EXPECT_EQ(Fake::graph_launches.load(), graphs + 2) << "the runs after the first replay a graph";
  EXPECT_EQ(Fake::graph_node_updates.load(), updates);
  EXPECT_EQ(run(second, d), std::vector<uint32_t>(8, 7));
  EXPECT_EQ(Fake::graph_launches.load(), graphs + 3);
  EXPECT_EQ(Fake::graph_node_updates.load(), updates + 2) << "both nodes bind other buffers";
  EXPECT_EQ(run(first, b), std::vector<uint32_t>(8, 5));
  EXPECT_EQ(Fake::graph_node_updates.load(), updates + 4);
  EXPECT_EQ(Fake::launches.load(), launches + 2) << "a kernel was launched outside the graph";
  const auto fallible = record(executable_, a, b, 3);
  EXPECT_EQ(run(fallible, b), std::vector<uint32_t>(8, 3));
  EXPECT_EQ(run(fallible, b), std::vector<uint32_t>(8, 3));
  EXPECT_EQ(Fake::graph_launches.load(), graphs + 4) << "kernels that may fail ran as a graph";
}

// A host call that queues device work (a library call) runs when it is issued, with the queue's
// stream, and signals once that work is over, with no host thread waiting for it; a kernel that
// waits for it on another queue is handed the wait on the device at once.
TEST_F(CudaQueueKernelTest, AStreamCallQueuesOnTheQueuesStreamAndItsWaitersFollowOnTheDevice) {
  hal::BufferRef a = zeroed(32), b = zeroed(32);
  auto called = hal::Semaphore::create(), copied = hal::Semaphore::create();
  std::atomic<int> host_runs{0};
  std::promise<void> go;
  std::shared_future<void> held = go.get_future().share();
  auto* data = static_cast<uint32_t*>(address(buffer_pointer(*a)));
  CUstream seen = nullptr;
  ASSERT_TRUE(queue_
                  ->stream_call(
                      {}, {{called, 1}},
                      [&](const hal::SemaphoreList&) {
                        ++host_runs;
                        return Status();
                      },
                      [&](void* stream) {
                        seen = static_cast<CUstream>(stream);
                        stream_of(seen)->push([held, data] {
                          held.wait();
                          std::fill(data, data + 8, 7u);
                        });
                        return Status();
                      })
                  .ok());
  ASSERT_NE(seen, nullptr) << "not run when issued";
  ASSERT_TRUE(queue2_->dispatch({{called, 1}}, {{copied, 1}}, copy(a, b)).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 1) << "the wait was not handed to the device";
  Result<uint64_t> reached = called->query();
  ASSERT_TRUE(reached.ok()) << reached.status();
  EXPECT_EQ(*reached, 0u) << "signalled before its work ran";
  go.set_value();
  ASSERT_TRUE(wait(copied, 1).ok());
  EXPECT_EQ(read(b), std::vector<uint32_t>(8, 7));
  EXPECT_EQ(host_runs.load(), 0) << "the host function ran on a queue with a stream";
}

// A library's work cannot be stopped on the device by the wait gate, so a stream call that waits
// for kernels waits on the host: when they fail it never runs and its signal fails with their
// failure; when they succeed it runs then.
TEST_F(CudaQueueKernelTest, AStreamCallAfterKernelsWaitsOnTheHost) {
  auto first = hal::Semaphore::create(), second = hal::Semaphore::create();
  std::atomic<int> ran{0};
  auto count = [&](void*) {
    ++ran;
    return Status();
  };
  auto never = [](const hal::SemaphoreList&) { return internal_error("the host function ran"); };
  Fake::arm();
  ASSERT_TRUE(queue_->dispatch({}, {{first, 1}}, fail()).ok());
  ASSERT_TRUE(queue2_->stream_call({{first, 1}}, {{second, 1}}, never, count).ok());
  EXPECT_EQ(Fake::stream_waits.load(), 0) << "a wait on kernels was handed to the device";
  Fake::release();
  Status status = wait(second, 1);
  EXPECT_NE(status.message().find("kernel 'fail_kernel' failed with code 7"), std::string::npos) << status;
  EXPECT_EQ(ran.load(), 0) << "ran after the kernels it waited for failed";
  hal::BufferRef a = buffer(32);
  auto third = hal::Semaphore::create(), fourth = hal::Semaphore::create();
  ASSERT_TRUE(queue_->dispatch({}, {{third, 1}}, fill(a, 4)).ok());
  ASSERT_TRUE(queue2_->stream_call({{third, 1}}, {{fourth, 1}}, never, count).ok());
  ASSERT_TRUE(wait(fourth, 1).ok());
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace kiln::cuda
