// The cuda device's collectives over NCCL without a GPU: run by ctest under `mpiexec -np 2` with
// KILN_NCCL_LIBRARY naming the NCCL stand-in (common/nccl_stand_in.cc), on the CUDA driver's
// stand-in (common/cuda_fake_api.h), whose device memory is host memory. What runs for real is
// kiln's side: NCCL loaded by its path, the unique id shared over the world, the communicator
// made, each collective put on the call's stream, the types NCCL cannot combine exactly sent
// through the host instead, the mean divided after, and the watchdog that aborts a collective
// another rank never joins. Every result must be the cpu device's (the world over MPI), bit for
// bit.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_fake_api.h"
#include "common/scoped_env.h"
#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/ral/context.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/mangle.h"
#include "kiln/ral/world.h"
#include "ral/library/cuda_collectives.h"
#include "ral/library/narrow_floats.h"
#include "ral/library/nccl.h"

namespace kiln::ral::library {
namespace {

using cuda::fake::Fake;
using cuda::fake::fake_api;

// Counts of elements: every rank's x for allreduce, broadcast and allgather; reduce_scatter's x
// holds a part of kPart for each rank.
constexpr int64_t kCount = 6, kPart = 3;

// The code of a 1-D tensor of T in full names: m1df32.
template <typename T>
std::string memref_code() {
  return std::string(type_code<MemRef<T, 1>>().view());
}

// Rank r's element i: small whole numbers, some negative, so that every sum is exact and the
// maxima and minima differ between ranks.
template <typename T>
T value(int rank, int64_t i) {
  const int v = static_cast<int>((rank * 5 + i * 3) % 7) - (rank == 1 ? 3 : 0);
  if constexpr (std::is_same_v<T, bool>) {
    return (rank + i) % 3 == 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const float f = static_cast<float>(v);
    T out;
    narrow(&f, 1, &out);
    return out;
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(v + 3);
  } else {
    return static_cast<T>(v);
  }
}

class NcclCollectivesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<World*> w = world();
    ASSERT_TRUE(w.ok()) << w.status();
    world_ = *w;
    ASSERT_EQ(world_->size(), 2) << "run under mpiexec -np 2";
    ASSERT_TRUE(nccl().status.ok()) << nccl().status << " (KILN_NCCL_LIBRARY names the stand-in)";
    Result<bool> on_device = cuda_collectives_on_device();
    ASSERT_TRUE(on_device.ok() && *on_device) << on_device.status();
    Fake::misuse = 0;
    Result<std::shared_ptr<cuda::CuContext>> context = cuda::CuContext::create(fake_api(), cuda::fake::fake_record());
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *context;
    allocator_ = std::make_unique<cuda::CuAllocator>(context_, this);
    ral_ = std::make_unique<Context>("cuda");
    cuda::ContextScope scope(context_->target());
    ASSERT_EQ(fake_api().StreamCreate(&stream_, 0), cuda::CUDA_SUCCESS);
  }
  void TearDown() override {
    if (ral_) ral_->finish();
    ral_.reset();
    if (stream_) {
      cuda::ContextScope scope(context_->target());
      fake_api().StreamDestroy(stream_);
    }
    allocator_.reset();
    context_.reset();
    EXPECT_EQ(Fake::misuse.load(), 0) << "a CUDA call without the context pushed";
  }

  // A "device" buffer of `values`; in the stand-in its memory is host memory.
  template <typename T>
  hal::BufferRef buffer(const T* values, int64_t count) {
    Result<hal::BufferRef> b = allocator_->allocate({}, std::max<size_t>(count * sizeof(T), 4));
    EXPECT_TRUE(b.ok()) << b.status();
    std::memcpy(host(*b), values, count * sizeof(T));
    return *b;
  }
  template <typename T>
  hal::BufferRef buffer(const std::vector<T>& values) {
    return buffer(values.data(), static_cast<int64_t>(values.size()));
  }
  static void* host(const hal::BufferRef& b) { return cuda::fake::address(cuda::buffer_pointer(*b)); }

  // One call of `name` in an execution on the stream (cuda) or on the host (cpu).
  static Status call(Context& context, const std::string& name, std::vector<void*> args, void* stream) {
    ExecutionContext execution(context, 0, 0);
    execution.set_device_stream(stream);
    args.insert(args.begin(), nullptr);
    execution.call(name.c_str(), args.data());
    return execution.finish();
  }

  // `kind` (allreduce, reduce_scatter, allgather, broadcast) of T with `attribute` (op or root)
  // on cuda against cpu: the same bits.
  template <typename T>
  void check(const std::string& kind, int64_t attribute) {
    SCOPED_TRACE(kind + " of " + memref_code<T>() + " with " + std::to_string(attribute));
    const int rank = world_->rank();
    const int64_t in = kind == "reduce_scatter" ? kPart * 2 : kind == "allgather" ? kPart : kCount;
    const int64_t out = kind == "reduce_scatter" ? kPart : kind == "allgather" ? kPart * 2 : kCount;
    // Arrays, not vectors: std::vector<bool> has no data().
    auto x = std::make_unique<T[]>(in), expected = std::make_unique<T[]>(out), got = std::make_unique<T[]>(out),
         zeros = std::make_unique<T[]>(out);
    for (int64_t i = 0; i < in; ++i) x[i] = value<T>(rank, i);
    const std::string types = memref_code<T>() + "_" + memref_code<T>();
    const std::string attributes = kind == "allgather" ? "" : "_i64";
    auto name = [&](const char* device) { return kind + "___" + device + "___pvoid_" + types + attributes + "___void"; };

    MemRef<T, 1> hx{x.get(), {in}}, hy{expected.get(), {out}};
    Context cpu("cpu");
    std::vector<void*> host_args = {&hx, &hy};
    if (kind != "allgather") host_args.push_back(&attribute);
    Status on_cpu = call(cpu, name("cpu"), host_args, nullptr);
    cpu.finish();
    ASSERT_TRUE(on_cpu.ok()) << on_cpu;

    hal::BufferRef xb = buffer(x.get(), in), yb = buffer(zeros.get(), out);
    MemRef<T, 1> dx{reinterpret_cast<T*>(xb.get()), {in}}, dy{reinterpret_cast<T*>(yb.get()), {out}};
    std::vector<void*> device_args = {&dx, &dy};
    if (kind != "allgather") device_args.push_back(&attribute);
    Status on_cuda = call(*ral_, name("cuda"), device_args, stream_);
    ASSERT_TRUE(on_cuda.ok()) << on_cuda;
    cuda::fake::stream_of(stream_)->synchronize();
    std::memcpy(got.get(), host(yb), out * sizeof(T));
    EXPECT_EQ(std::memcmp(got.get(), expected.get(), out * sizeof(T)), 0);
  }

  template <typename T>
  void check_every_collective() {
    for (int64_t op = 0; op < 4; ++op) {
      if (op == 1 && !cuda::nvrtc_available().ok() &&
          (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
        continue;  // the mean's division is a kernel of the library's module, which NVRTC builds
      }
      check<T>("allreduce", op);
      check<T>("reduce_scatter", op);
    }
    check<T>("allgather", 0);
    check<T>("broadcast", 1);
  }

  World* world_ = nullptr;
  std::shared_ptr<cuda::CuContext> context_;
  std::unique_ptr<cuda::CuAllocator> allocator_;
  std::unique_ptr<Context> ral_;
  cuda::CUstream stream_ = nullptr;
};

// Every element type and op: over NCCL where it combines exactly, else through the host.
TEST_F(NcclCollectivesTest, EveryElementTypeCombinesAsOnTheCpu) {
  // The mean's division, as the library's module has it (built by NVRTC, run by the stand-in).
  Fake::extra_kernels["kiln_divide_f32"] = [](void** p, unsigned, unsigned) -> std::function<void()> {
    auto* y = static_cast<float*>(cuda::fake::address(*static_cast<cuda::CUdeviceptr*>(p[0])));
    const auto n = *static_cast<unsigned long long*>(p[1]);
    const float d = *static_cast<float*>(p[2]);
    return [=] { for (unsigned long long i = 0; i < n; ++i) y[i] = y[i] / d; };
  };
  Fake::extra_kernels["kiln_divide_f64"] = [](void** p, unsigned, unsigned) -> std::function<void()> {
    auto* y = static_cast<double*>(cuda::fake::address(*static_cast<cuda::CUdeviceptr*>(p[0])));
    const auto n = *static_cast<unsigned long long*>(p[1]);
    const double d = *static_cast<double*>(p[2]);
    return [=] { for (unsigned long long i = 0; i < n; ++i) y[i] = y[i] / d; };
  };
  check_every_collective<bool>();
  check_every_collective<int8_t>();
  check_every_collective<uint8_t>();
  check_every_collective<int16_t>();
  check_every_collective<uint16_t>();
  check_every_collective<int32_t>();
  check_every_collective<uint32_t>();
  check_every_collective<int64_t>();
  check_every_collective<uint64_t>();
  check_every_collective<Half>();
  check_every_collective<BFloat16>();
  check_every_collective<float>();
  check_every_collective<double>();
  Fake::extra_kernels.clear();
}

// The collective goes on the call's stream after what is there, and the call returns without
// waiting for it: held back behind a gate on the stream, the output is unwritten until it opens.
TEST_F(NcclCollectivesTest, ACollectiveQueuesOnTheCallsStream) {
  std::vector<float> x(kCount, static_cast<float>(world_->rank() + 1));
  hal::BufferRef xb = buffer(x), yb = buffer(std::vector<float>(kCount, -1.0f));
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  cuda::fake::stream_of(stream_)->push([opened] { opened.wait(); });
  MemRef<float, 1> dx{reinterpret_cast<float*>(xb.get()), {kCount}}, dy{reinterpret_cast<float*>(yb.get()), {kCount}};
  int64_t sum = 0;
  Status queued = call(*ral_, "allreduce___cuda___pvoid_m1df32_m1df32_i64___void", {&dx, &dy, &sum}, stream_);
  ASSERT_TRUE(queued.ok()) << queued;
  EXPECT_EQ(static_cast<float*>(host(yb))[0], -1.0f) << "the call waited for its collective";
  gate.set_value();
  cuda::fake::stream_of(stream_)->synchronize();
  for (int64_t i = 0; i < kCount; ++i) EXPECT_EQ(static_cast<float*>(host(yb))[i], 3.0f);
}

// A collective rank 1 never joins: rank 0's watchdog aborts the communicator once the timeout
// has passed from when its stream reached it, and the device is lost with a message naming the
// collective (its output cannot be trusted). Rank 1 joins only after rank 0 has seen that (told
// over the world), so that rank 0's abandoned request completes before the job ends.
TEST_F(NcclCollectivesTest, ACollectiveAnotherRankNeverJoinsIsAbortedAtTheTimeout) {
  test::ScopedEnv timeout("KILN_COLLECTIVE_TIMEOUT", "1");
  std::vector<float> x(kCount, 1.0f);
  hal::BufferRef xb = buffer(x), yb = buffer(std::vector<float>(kCount, -1.0f));
  MemRef<float, 1> dx{reinterpret_cast<float*>(xb.get()), {kCount}}, dy{reinterpret_cast<float*>(yb.get()), {kCount}};
  int64_t sum = 0;
  const std::string allreduce = "allreduce___cuda___pvoid_m1df32_m1df32_i64___void";
  // Both ranks connect first, with a collective both join.
  Status joined = call(*ral_, allreduce, {&dx, &dy, &sum}, stream_);
  ASSERT_TRUE(joined.ok()) << joined;
  cuda::fake::stream_of(stream_)->synchronize();
  if (world_->rank() == 0) {
    Status queued = call(*ral_, allreduce, {&dx, &dy, &sum}, stream_);
    ASSERT_TRUE(queued.ok()) << queued;
    cuda::fake::stream_of(stream_)->synchronize();  // ends once the abort ends the collective
    const Status lost = context_->lost();
    EXPECT_EQ(lost.code(), StatusCode::kDeadlineExceeded) << lost;
    EXPECT_NE(lost.message().find("allreduce (sum) of 6 f32 over NCCL"), std::string::npos) << lost;
    EXPECT_NE(lost.message().find("KILN_COLLECTIVE_TIMEOUT"), std::string::npos) << lost;
    Status later = call(*ral_, allreduce, {&dx, &dy, &sum}, stream_);
    EXPECT_EQ(later.code(), StatusCode::kDeadlineExceeded) << later;
  }
  int32_t seen = 1;
  Collective told;
  told.kind = CollectiveKind::kBroadcast;
  told.in = told.out = &seen;
  told.count = 1;
  told.type = ir::DType::kI32;
  ASSERT_TRUE(world_->run(told).ok());
  if (world_->rank() == 1) {
    Status late = call(*ral_, allreduce, {&dx, &dy, &sum}, stream_);
    ASSERT_TRUE(late.ok()) << late;
    cuda::fake::stream_of(stream_)->synchronize();
    EXPECT_TRUE(context_->lost().ok()) << context_->lost();
  }
}

}  // namespace
}  // namespace kiln::ral::library
