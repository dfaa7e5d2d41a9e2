// A two-queue pipeline on the HAL, the demo until the compiler exists.
//
// Queue "produce" uploads a chunk of samples and runs `polynomial` on it; queue "reduce" waits on
// that chunk's semaphore value, runs `partial_sums` (one workgroup per block) and reads the block
// sums back. Two chunk buffers alternate, so chunk i+1 is produced while chunk i is reduced; a
// second semaphore tells the producer when a buffer is free again. The host only waits at the end.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"

using namespace kiln;

static const char* kKernels = R"C(
#include <math.h>
/* y = 0.5 x^2 - x + 2, over one block of 1024 floats per workgroup */
int polynomial(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  float* x = (float*)s->bindings[0];
  uint32_t n = s->constants[0], begin = id->x * 1024, end = begin + 1024 < n ? begin + 1024 : n;
  for (uint32_t i = begin; i < end; ++i) x[i] = 0.5f * x[i] * x[i] - x[i] + 2.0f;
  return 0;
}
/* sums[block] = sum of one block of 1024 floats (in double, for a stable answer) */
int partial_sums(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  const float* x = (const float*)s->bindings[0];
  double* sums = (double*)s->bindings[1];
  uint32_t n = s->constants[0], begin = id->x * 1024, end = begin + 1024 < n ? begin + 1024 : n;
  double acc = 0;
  for (uint32_t i = begin; i < end; ++i) acc += x[i];
  sums[id->x] = acc;
  return 0;
}
)C";

static int fail(const Status& status) {
  std::fprintf(stderr, "hal_pipeline: %s\n", status.to_string().c_str());
  return 1;
}

int main() {
  constexpr uint32_t kChunk = 1 << 20, kBlocks = kChunk / 1024, kChunks = 16;
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("cpu");
  if (!device.ok()) return fail(device.status());
  hal::Device& dev = **device;
  std::printf("device %s (%s), %u worker threads\n", dev.info().name.c_str(),
              dev.info().description.c_str(), dev.info().capabilities.compute_units);

  int64_t t0 = now_ns();
  Result<hal::ExecutableRef> exe = dev.compile_executable(
      {"c", kKernels, {{"polynomial", 1, 1}, {"partial_sums", 2, 1}}, "hal_pipeline.c"});
  if (!exe.ok()) return fail(exe.status());
  std::printf("compiled kernels in %.1f ms (a second run hits the disk cache)\n", (now_ns() - t0) / 1e6);

  auto produce = dev.create_queue("produce"), reduce = dev.create_queue("reduce");
  if (!produce.ok()) return fail(produce.status());
  if (!reduce.ok()) return fail(reduce.status());
  hal::BufferRef chunk[2], sums[2];
  for (int b = 0; b < 2; ++b) {
    auto c = dev.allocator().allocate({}, kChunk * sizeof(float));
    auto s = dev.allocator().allocate({}, kBlocks * sizeof(double));
    if (!c.ok()) return fail(c.status());
    if (!s.ok()) return fail(s.status());
    chunk[b] = *c;
    sums[b] = *s;
  }
  std::vector<std::vector<float>> input(kChunks, std::vector<float>(kChunk));
  for (uint32_t c = 0; c < kChunks; ++c) {
    for (uint32_t i = 0; i < kChunk; ++i) input[c][i] = float((c * kChunk + i) % 1000) / 100.0f;
  }
  std::vector<std::vector<double>> block_sums(kChunks, std::vector<double>(kBlocks));

  // Actions on one queue are ordered by semaphores only, not by submission, so each queue keeps
  // a timeline of its own (the IREE idiom): step n waits on value n-1 and signals n. Chunk c's
  // two steps on each queue are values 2c+1 and 2c+2.
  auto produce_timeline = dev.create_semaphore(0);
  auto reduce_timeline = dev.create_semaphore(0);
  t0 = now_ns();
  for (uint32_t c = 0; c < kChunks; ++c) {
    int b = c % 2;
    const uint64_t step = 2 * uint64_t{c};
    // Buffer b is free once chunk c-2 has been read back.
    hal::SemaphoreList write_waits = {{produce_timeline, step}};
    if (c >= 2) write_waits.push_back({reduce_timeline, step - 2});
    hal::DispatchCommand poly{*exe, 0, {kBlocks, 1, 1}, {kChunk}, {{chunk[b]}}};
    hal::DispatchCommand sum{*exe, 1, {kBlocks, 1, 1}, {kChunk}, {{chunk[b]}, {sums[b]}}};
    Status st = (*produce)->write(write_waits, {{produce_timeline, step + 1}}, input[c].data(),
                                  chunk[b], 0, kChunk * sizeof(float));
    if (st.ok()) {
      st = (*produce)->dispatch({{produce_timeline, step + 1}}, {{produce_timeline, step + 2}},
                                std::move(poly));
    }
    if (st.ok()) {
      st = (*reduce)->dispatch({{reduce_timeline, step}, {produce_timeline, step + 2}},
                               {{reduce_timeline, step + 1}}, std::move(sum));
    }
    if (st.ok()) {
      st = (*reduce)->read({{reduce_timeline, step + 1}}, {{reduce_timeline, step + 2}}, sums[b],
                           0, block_sums[c].data(), kBlocks * sizeof(double));
    }
    if (!st.ok()) return fail(st);
  }
  Status done = reduce_timeline->wait(2 * kChunks, Timeout::after_ms(60000));
  if (!done.ok()) return fail(done);
  double seconds = (now_ns() - t0) / 1e9;

  double total = 0, expected = 0;
  for (uint32_t c = 0; c < kChunks; ++c) {
    for (double s : block_sums[c]) total += s;
    for (float x : input[c]) expected += double(0.5f * x * x - x + 2.0f);
  }
  std::printf("%u chunks of %u floats through 2 queues in %.1f ms (%.2f GB/s)\n", kChunks, kChunk,
              seconds * 1e3, kChunks * double(kChunk) * sizeof(float) / seconds / 1e9);
  std::printf("sum of y = %.6e, expected %.6e: %s\n", total, expected,
              std::fabs(total - expected) <= 1e-6 * std::fabs(expected) ? "match" : "MISMATCH");
  return std::fabs(total - expected) <= 1e-6 * std::fabs(expected) ? 0 : 1;
}
