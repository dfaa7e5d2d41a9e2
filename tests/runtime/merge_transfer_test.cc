// device_to_device in its three modes (kNo, kCopy, kStreaming), between contexts on two streams
// of one device and between two separate cpu devices (staged through host memory): values
// arrive, `g += g.merge` sums, the merge buffer grows, and the per-node ordering holds (a copy
// waits for the source's writer; a later write of the source waits for the copy or the merge
// routine that reads it).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kMergeTransferProgram[] = R"(
param g : f32[8]
param big : f32[4096]
param c : f32[8] = uniform(-4, 4)
param m : f32[160, 160] = uniform(-1, 1)
param mm : f32[160, 160]
routine bump {
  g[i] = g[i] + 1
}
routine add_c {
  g[i] = g[i] + c[i]
}
routine merge_g {
  g[i] += g.merge[i]
}
routine merge_big {
  big[i] += big.merge[i]
}
# Keeps its stream busy for a while, so that a missing dependency shows.
routine busy {
  mm[i, j] = sum(m[i, k] * m[k, j])
}
)";

enum class Placement { kTwoStreams, kTwoDevices };

std::string placement_name(const ::testing::TestParamInfo<Placement>& info) {
  return info.param == Placement::kTwoStreams ? "TwoStreamsOfOneDevice" : "TwoCpuDevices";
}
void PrintTo(Placement placement, std::ostream* os) {
  *os << (placement == Placement::kTwoStreams ? "two streams of one device" : "two cpu devices");
}

// Contexts A (source) and B (destination) with every routine linked, on two streams of one
// device or on one stream each of two separate cpu devices. Automatic transfers are off, so
// that A and B can hold different values of one node.
class MergeTransferTest : public ::testing::TestWithParam<Placement> {
 protected:
  void SetUp() override {
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kMergeTransferProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program_, 3));
    nodes_->set_automatic_transfers(false);
    const int devices = GetParam() == Placement::kTwoDevices ? 2 : 1;
    for (int d = 0; d < devices; ++d) {
      KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device());
      KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
      backends_.push_back(backend);
    }
    std::vector<std::string> names;
    for (const ir::Routine& r : program_.routines) names.push_back(r.name);
    KILN_ASSERT_OK_AND_ASSIGN(code_, backends_[0]->compile_batch(program_, names, {.shared = true, .lower = {}}));
    for (int s = 0; s < 2; ++s) {
      Backend& backend = *backends_[s % backends_.size()];
      KILN_ASSERT_OK_AND_ASSIGN(streams_[s], backend.new_stream());
      KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend.make_context(streams_[s], nodes_, s == 0 ? "A" : "B"));
      KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch batch, backend.link_batch(root, code_));
      contexts_[s] = batch.context;
      for (const RoutineRef& r : batch.routines) routines_[s][r->name()] = r;
    }
  }
  void TearDown() override {
    for (const auto& b : backends_) KILN_EXPECT_OK(b->await(wait_limit()));
  }

  bool same_device() const { return GetParam() == Placement::kTwoStreams; }
  Status run(int s, const std::string& routine) { return routines_[s].at(routine)->run(); }

  // Puts `values` into context s's array of `node` (through the host copy).
  void set(int s, const std::string& node, const std::vector<float>& values) {
    KILN_ASSERT_OK(write_floats(*nodes_, node, values));
    KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::from_host(contexts_[s], node));
    EXPECT_TRUE(moved);
  }
  // Context s's array of `node`, which a routine or transfer must have written since the host
  // copy last matched it (so that to_host copies it back).
  std::vector<float> get(int s, const std::string& node) {
    Result<bool> moved = runtime::to_host(contexts_[s], node);
    EXPECT_TRUE(moved.ok()) << moved.status();
    EXPECT_TRUE(moved.ok() && *moved) << node << " of context " << s << " was not the newest";
    Result<std::vector<float>> values = read_floats(*nodes_, node);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<float>();
  }
  // Keeps stream s busy for a while.
  void keep_busy(int s) {
    for (int i = 0; i < 12; ++i) KILN_ASSERT_OK(run(s, "busy"));
  }

  static std::vector<float> plus(const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<float> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
    return out;
  }

  ir::Program program_;
  std::shared_ptr<NodeTable> nodes_;
  std::vector<std::shared_ptr<Backend>> backends_;
  CodeRef code_;
  StreamRef streams_[2];
  ContextRef contexts_[2];
  std::map<std::string, RoutineRef> routines_[2];
};

const std::vector<float> kA = ramp(8, 1, 1);        // 1 2 ... 8
const std::vector<float> kB = ramp(8, 100, 100);    // 100 200 ... 800
const std::vector<float> kOnes(8, 1.0f);

TEST_P(MergeTransferTest, NoMergeCopiesIntoTheDestinationsArray) {
  set(0, "g", kA);
  set(1, "g", kB);
  // The copy waits for A's writer, scheduled just before on the other stream.
  keep_busy(0);
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::device_to_device("g", MergeMode::kNo, contexts_[1], contexts_[0]));
  EXPECT_TRUE(moved);
  EXPECT_EQ(get(1, "g"), plus(kA, kOnes));
  // B's copy is its own: bumping it leaves A alone.
  KILN_ASSERT_OK(run(1, "bump"));
  KILN_ASSERT_OK(run(1, "bump"));
  EXPECT_EQ(get(1, "g"), plus(kA, plus(kOnes, plus(kOnes, kOnes))));
  KILN_ASSERT_OK(run(0, "bump"));
  EXPECT_EQ(get(0, "g"), plus(kA, plus(kOnes, kOnes)));

  // A kShared node is one array per device: nothing to move between two streams of it.
  KILN_ASSERT_OK_AND_ASSIGN(moved, runtime::device_to_device("c", MergeMode::kNo, contexts_[1], contexts_[0]));
  EXPECT_EQ(moved, !same_device());
  // Same array, or a copy of the same values: add_c adds the same c on both sides.
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> c, read_floats(*nodes_, "c"));
  set(0, "g", kA);
  set(1, "g", kA);
  KILN_ASSERT_OK(run(0, "add_c"));
  EXPECT_EQ(get(0, "g"), plus(kA, c));
  KILN_ASSERT_OK(run(1, "add_c"));
  EXPECT_EQ(get(1, "g"), plus(kA, c));
}

TEST_P(MergeTransferTest, NoMergeWriteAfterRead) {
  set(0, "g", kA);
  set(1, "g", kB);
  // The copy runs late on B's busy stream; A's later write of its g must wait for it.
  keep_busy(1);
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kNo, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(0, "bump"));
  EXPECT_EQ(get(0, "g"), plus(kA, kOnes));
  KILN_ASSERT_OK(run(1, "bump"));
  EXPECT_EQ(get(1, "g"), plus(kA, kOnes)) << "B got A's g from before A's bump, then its own bump";
}

TEST_P(MergeTransferTest, MergeSumsInAllModes) {
  for (MergeMode mode : {MergeMode::kCopy, MergeMode::kStreaming}) {
    SCOPED_TRACE(mode == MergeMode::kCopy ? "kCopy" : "kStreaming");
    set(0, "g", kA);
    set(1, "g", kB);
    keep_busy(0);
    KILN_ASSERT_OK(run(0, "bump"));
    KILN_ASSERT_OK_AND_ASSIGN(bool moved, runtime::device_to_device("g", mode, contexts_[1], contexts_[0]));
    EXPECT_TRUE(moved);
    KILN_ASSERT_OK(run(1, "merge_g"));
    EXPECT_EQ(get(1, "g"), plus(kB, plus(kA, kOnes)));
    // The merge buffer still holds g: merging again adds it again.
    KILN_ASSERT_OK(run(1, "merge_g"));
    EXPECT_EQ(get(1, "g"), plus(kB, plus(plus(kA, kOnes), plus(kA, kOnes))));
    // And the source is unchanged.
    KILN_ASSERT_OK(run(0, "bump"));
    EXPECT_EQ(get(0, "g"), plus(kA, plus(kOnes, kOnes)));
  }
}

TEST_P(MergeTransferTest, MergeBufferGrowsForALargerNode) {
  const std::vector<float> big_a = ramp(4096, 0, 0.5f);
  const std::vector<float> big_b = ramp(4096, 7, -1);
  set(0, "g", kA);
  set(1, "g", kB);
  set(0, "big", big_a);
  set(1, "big", big_b);
  // All scheduled at once: growing the buffer must not disturb the merge still to run on it.
  keep_busy(1);
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(1, "merge_g"));
  KILN_ASSERT_OK(runtime::device_to_device("big", MergeMode::kCopy, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(1, "merge_big"));
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(1, "merge_g"));
  EXPECT_EQ(get(1, "big"), plus(big_b, big_a));
  EXPECT_EQ(get(1, "g"), plus(kB, plus(kA, plus(kA, kOnes))));
}

TEST_P(MergeTransferTest, CopyIntoTheMergeBufferWriteAfterRead) {
  set(0, "g", kA);
  set(1, "g", kB);
  // The copy and the merge run late on B's busy stream; A's later write must wait for the copy.
  keep_busy(1);
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kCopy, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(1, "merge_g"));
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK(run(0, "bump"));
  EXPECT_EQ(get(0, "g"), plus(kA, plus(kOnes, kOnes)));
  KILN_ASSERT_OK(run(1, "bump"));
  EXPECT_EQ(get(1, "g"), plus(kB, plus(kA, kOnes))) << "the merge added A's g from before A's bumps";
}

TEST_P(MergeTransferTest, StreamingReadsTheSourceWhenTheMergeRuns) {
  set(0, "g", kA);
  set(1, "g", kB);
  // A writes its g after the transfer but before the merge is scheduled. Streaming (same device)
  // reads A's array itself, so the merge sees the write; across devices it is a copy taken
  // when the transfer was scheduled.
  keep_busy(1);
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kStreaming, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK(run(1, "merge_g"));
  EXPECT_EQ(get(1, "g"), same_device() ? plus(kB, plus(kA, kOnes)) : plus(kB, kA));
}

TEST_P(MergeTransferTest, StreamingWriteAfterRead) {
  set(0, "g", kA);
  set(1, "g", kB);
  // The merge runs late on B's busy stream, reading A's g; A's later writes wait for it.
  keep_busy(1);
  KILN_ASSERT_OK(runtime::device_to_device("g", MergeMode::kStreaming, contexts_[1], contexts_[0]).status());
  KILN_ASSERT_OK(run(1, "merge_g"));
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK(run(0, "bump"));
  KILN_ASSERT_OK(run(0, "bump"));
  EXPECT_EQ(get(0, "g"), plus(kA, plus(kOnes, plus(kOnes, kOnes))));
  KILN_ASSERT_OK(run(1, "bump"));
  EXPECT_EQ(get(1, "g"), plus(kB, plus(kA, kOnes))) << "the merge added A's g from before A's bumps";
}

TEST_P(MergeTransferTest, BothDirectionsAtOnce) {
  // Each side merges the other's g. A copy reads the value from before either merge; streaming
  // (same device) reads the source when the merge runs, so B's merge, scheduled after A's,
  // sees A's merged g.
  for (MergeMode mode : {MergeMode::kCopy, MergeMode::kStreaming}) {
    SCOPED_TRACE(mode == MergeMode::kCopy ? "kCopy" : "kStreaming");
    set(0, "g", kA);
    set(1, "g", kB);
    KILN_ASSERT_OK(runtime::device_to_device("g", mode, contexts_[1], contexts_[0]).status());
    KILN_ASSERT_OK(runtime::device_to_device("g", mode, contexts_[0], contexts_[1]).status());
    KILN_ASSERT_OK(run(0, "merge_g"));
    KILN_ASSERT_OK(run(1, "merge_g"));
    const bool streams = mode == MergeMode::kStreaming && same_device();
    EXPECT_EQ(get(1, "g"), streams ? plus(plus(kA, kB), kB) : plus(kA, kB));
    KILN_ASSERT_OK(run(0, "bump"));
    EXPECT_EQ(get(0, "g"), plus(plus(kA, kB), kOnes));
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, MergeTransferTest,
                         ::testing::Values(Placement::kTwoStreams, Placement::kTwoDevices), placement_name);

}  // namespace
}  // namespace kiln::runtime_test
