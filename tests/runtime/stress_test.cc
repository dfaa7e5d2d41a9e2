// Randomized stress of the runtime: with a fixed seed, many random sequences of operations over
// three streams of one cpu device (routines, host writes, from_host, to_host, host reads,
// device_to_device in every mode followed by merge routines), on per-stream nodes and kShared
// ones (read-only k, t written by stream 0 only).
//
// Each sequence runs three ways:
//  - through the runtime fully asynchronously (no waits between operations, one await at the end);
//  - through the runtime one operation at a time (Backend::await after every operation);
//  - through a plain sequential model of the runtime's contract computed here on the host.
// Every value the host reads and every transfer's result (whether it moved data) must agree:
// bit for bit between the two runtime runs (same kernels on the same data in the same order per
// array), within a float tolerance against the model. The final state of every context's
// arrays is read through a reader context. Nothing lost, nothing torn.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/base/random.h"
#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr int kN = 256;
constexpr int kStreams = 3;
constexpr int kReader = kStreams;  // the reader context's index (on stream 0)

constexpr const char kStressProgram[] = R"(
param a : f32[256]
param b : f32[256]
param c : f32[256]
param k : f32[256] = uniform(-1, 1)
param t : f32[256]
param s : f32
routine r_a {
  a[i] = b[i] * 0.5 + c[i] * 0.25 + k[i] + t[i] * 0.125
}
routine r_b {
  b[i] = b[i] * 0.75 + a[i] * 0.5
}
routine r_c {
  c[i] = a[i] - b[i] * 0.5
}
routine r_s {
  s = sum(a[i])
}
routine r_t {
  t[i] = t[i] * 0.5 + a[i] * 0.25
}
routine merge_a {
  a[i] = (a[i] + a.merge[i]) * 0.5
}
routine merge_b {
  b[i] = b[i] - b.merge[i] * 0.25
}
)";

const std::vector<std::string> kPerStream = {"a", "b", "c", "s"};
const std::vector<std::string> kAllNodes = {"a", "b", "c", "s", "k", "t"};
bool is_shared(const std::string& node) { return node == "k" || node == "t"; }
size_t size_of(const std::string& node) { return node == "s" ? 1 : kN; }

enum class OpKind { kRun, kHostWrite, kFromHost, kToHost, kRead, kDeviceToDevice };

struct Op {
  OpKind kind = OpKind::kRun;
  int ctx = 0;       // the context (destination of a transfer)
  int src = 0;       // the source context of device_to_device
  std::string name;  // routine or node
  MergeMode mode = MergeMode::kNo;
  std::vector<float> values;  // host writes

  std::string describe() const {
    static const char* kModes[] = {"kNo", "kCopy", "kStreaming"};
    std::ostringstream os;
    switch (kind) {
      case OpKind::kRun: os << "run " << name << " in " << ctx; break;
      case OpKind::kHostWrite: os << "write " << name; break;
      case OpKind::kFromHost: os << "from_host " << name << " into " << ctx; break;
      case OpKind::kToHost: os << "to_host " << name << " from " << ctx; break;
      case OpKind::kRead: os << "read " << name; break;
      case OpKind::kDeviceToDevice:
        os << "device_to_device " << name << " " << kModes[static_cast<int>(mode)] << " " << src << " -> " << ctx;
        break;
    }
    return os.str();
  }
};

// What one operation showed the host: whether a transfer moved data, or the values read.
struct Entry {
  std::string op;
  int moved = -1;  // -1: not a transfer
  std::vector<float> values;
};
using Log = std::vector<Entry>;

std::vector<float> random_values(Random& random, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int>(random.next_u64() % 129) - 64) / 64.0f;
  return v;
}

// A random sequence of 20-40 operations, then the final reads of every context's arrays.
std::vector<Op> random_sequence(uint64_t seed) {
  Random random(seed);
  auto pick = [&](uint64_t n) { return static_cast<int>(random.next_u64() % n); };
  std::vector<Op> ops;
  const int count = 20 + pick(21);
  for (int i = 0; i < count; ++i) {
    const int roll = pick(100);
    Op op;
    op.ctx = pick(kStreams);
    if (roll < 35) {
      static const char* kRoutines[] = {"r_a", "r_b", "r_c", "r_s", "r_t"};
      op.kind = OpKind::kRun;
      op.name = kRoutines[pick(op.ctx == 0 ? 5 : 4)];  // t is written on stream 0 only
    } else if (roll < 45) {
      op.kind = OpKind::kHostWrite;
      op.name = kAllNodes[pick(kAllNodes.size())];
      op.values = random_values(random, size_of(op.name));
    } else if (roll < 55) {
      op.kind = OpKind::kFromHost;
      op.name = kAllNodes[pick(kAllNodes.size())];
    } else if (roll < 65) {
      op.kind = OpKind::kToHost;
      op.name = kAllNodes[pick(kAllNodes.size())];
    } else if (roll < 72) {
      op.kind = OpKind::kRead;
      op.name = kAllNodes[pick(kAllNodes.size())];
    } else {
      op.kind = OpKind::kDeviceToDevice;
      op.src = (op.ctx + 1 + pick(kStreams - 1)) % kStreams;
      op.mode = static_cast<MergeMode>(pick(3));
      const int which = pick(10);
      op.name = which < 5 ? "a" : which < 9 ? "b" : "t";
      if (op.name == "t") op.mode = MergeMode::kNo;
      ops.push_back(op);
      if (op.mode != MergeMode::kNo) {
        Op merge;
        merge.kind = OpKind::kRun;
        merge.ctx = op.ctx;
        merge.name = "merge_" + op.name;
        ops.push_back(merge);
      }
      continue;
    }
    ops.push_back(op);
  }
  // Every context's arrays, copied into the reader's and read back; then the shared ones.
  for (int ctx = 0; ctx < kStreams; ++ctx) {
    for (const std::string& node : kPerStream) {
      ops.push_back({OpKind::kDeviceToDevice, kReader, ctx, node, MergeMode::kNo, {}});
      ops.push_back({OpKind::kToHost, kReader, 0, node, MergeMode::kNo, {}});
      ops.push_back({OpKind::kRead, 0, 0, node, MergeMode::kNo, {}});
    }
  }
  ops.push_back({OpKind::kRead, 0, 0, "k", MergeMode::kNo, {}});
  ops.push_back({OpKind::kRead, 0, 0, "t", MergeMode::kNo, {}});
  return ops;
}

// ---- The runtime ----

struct Runner {
  std::shared_ptr<NodeTable> nodes;
  std::shared_ptr<Backend> backend;
  std::array<ContextRef, kStreams + 1> contexts;
  std::array<std::map<std::string, RoutineRef>, kStreams + 1> routines;
};

// Runs `ops`; with `one_at_a_time`, waits for the backend after every operation.
Log run_on_runtime(const ir::Program& program, const hal::DeviceRef& device, const CodeRef& code,
                   const std::vector<Op>& ops, bool automatic, bool one_at_a_time) {
  Log log;
  auto fail = [&](const std::string& what, const Status& status) {
    ADD_FAILURE() << what << ": " << status;
    log.push_back({what + ": " + status.to_string(), -1, {}});
  };
  Runner r;
  Result<std::shared_ptr<NodeTable>> nodes = NodeTable::create(program, 11);
  if (!nodes.ok()) return fail("node table", nodes.status()), log;
  Result<std::shared_ptr<Backend>> backend = Backend::create(device);
  if (!backend.ok()) return fail("backend", backend.status()), log;
  r.nodes = *nodes;
  r.backend = *backend;
  r.nodes->set_automatic_transfers(automatic);
  // t is written (by stream 0 only), so per stream by default: share it.
  if (Status shared = r.nodes->set_sharing("t", runtime::Sharing::kShared); !shared.ok()) {
    return fail("set_sharing", shared), log;
  }
  std::vector<runtime::StreamRef> streams;
  for (int s = 0; s < kStreams; ++s) {
    Result<runtime::StreamRef> stream = r.backend->new_stream();
    if (!stream.ok()) return fail("new_stream", stream.status()), log;
    streams.push_back(*stream);
  }
  for (int c = 0; c <= kStreams; ++c) {
    Result<ContextRef> root = r.backend->make_context(streams[c % kStreams], r.nodes);
    if (!root.ok()) return fail("make_context", root.status()), log;
    Result<runtime::LinkedBatch> batch = r.backend->link_batch(*root, code);
    if (!batch.ok()) return fail("link", batch.status()), log;
    r.contexts[c] = batch->context;
    for (const RoutineRef& routine : batch->routines) r.routines[c][routine->name()] = routine;
  }
  auto moved = [&](const Op& op, Result<bool> result) {
    if (!result.ok()) return fail(op.describe(), result.status());
    log.push_back({op.describe(), *result ? 1 : 0, {}});
  };
  for (const Op& op : ops) {
    switch (op.kind) {
      case OpKind::kRun: {
        const Status status = r.routines[op.ctx].at(op.name)->run();
        if (!status.ok()) fail(op.describe(), status);
        break;
      }
      case OpKind::kHostWrite: {
        const Status status = write_floats(*r.nodes, op.name, op.values);
        if (!status.ok()) fail(op.describe(), status);
        break;
      }
      case OpKind::kFromHost: moved(op, runtime::from_host(r.contexts[op.ctx], op.name)); break;
      case OpKind::kToHost: moved(op, runtime::to_host(r.contexts[op.ctx], op.name)); break;
      case OpKind::kRead: {
        Result<std::vector<float>> values = read_floats(*r.nodes, op.name);
        if (!values.ok()) {
          fail(op.describe(), values.status());
        } else {
          log.push_back({op.describe(), -1, *values});
        }
        break;
      }
      case OpKind::kDeviceToDevice:
        moved(op, runtime::device_to_device(op.name, op.mode, r.contexts[op.ctx], r.contexts[op.src]));
        break;
    }
    if (one_at_a_time) {
      const Status status = r.backend->await(wait_limit());
      if (!status.ok()) fail("await after " + op.describe(), status);
    }
  }
  const Status status = r.backend->await(wait_limit());
  if (!status.ok()) fail("final await", status);
  return log;
}

// ---- The model: the runtime's contract, one operation at a time on the host ----

class Model {
 public:
  Model(const ir::Program& program, bool automatic) : automatic_(automatic) {
    // Initial host copies as the runtime makes them (the same seed).
    Result<std::shared_ptr<NodeTable>> table = NodeTable::create(program, 11);
    EXPECT_TRUE(table.ok()) << table.status();
    for (const std::string& n : kAllNodes) {
      host_[n] = std::vector<float>(size_of(n));
      if (!table.ok()) continue;
      Result<std::vector<float>> v = read_floats(**table, n);
      EXPECT_TRUE(v.ok()) << v.status();
      if (v.ok()) host_[n] = *v;
    }
    // Linking uploads every array (a shared one once).
    for (int c = 0; c <= kStreams; ++c) {
      for (const std::string& n : kAllNodes) {
        if (c == 0 || !is_shared(n)) arrays_[key(c, n)] = {host_[n], false};
      }
    }
  }

  Log run(const std::vector<Op>& ops) {
    Log log;
    for (const Op& op : ops) {
      switch (op.kind) {
        case OpKind::kRun: run_routine(op.ctx, op.name); break;
        case OpKind::kHostWrite:
          host_[op.name] = op.values;
          for (auto& [k, array] : arrays_) {
            if (k.second == op.name) {
              array.stale = true;
              array.newer = false;  // the host's data is the newest now
            }
          }
          newest_.erase(op.name);
          break;
        case OpKind::kFromHost: {
          const Key k = key(op.ctx, op.name);
          Array& array = arrays_.at(k);
          const bool stale = array.stale;
          if (stale) upload(k);
          log.push_back({op.describe(), stale ? 1 : 0, {}});
          break;
        }
        case OpKind::kToHost: {
          const Key k = key(op.ctx, op.name);
          const bool newer = arrays_.at(k).newer;
          if (newer) download(k);
          log.push_back({op.describe(), newer ? 1 : 0, {}});
          break;
        }
        case OpKind::kRead:
          if (automatic_ && newest_.count(op.name)) download(newest_.at(op.name));
          log.push_back({op.describe(), -1, host_[op.name]});
          break;
        case OpKind::kDeviceToDevice: {
          const Key from = key(op.src, op.name);
          const int stream = op.ctx % kStreams;
          bool moved = true;
          if (op.mode == MergeMode::kNo) {
            const Key to = key(op.ctx, op.name);
            moved = to != from;
            if (moved) {
              arrays_.at(to).values = arrays_.at(from).values;
              written(to);
            }
          } else if (op.mode == MergeMode::kCopy) {
            merge_[stream] = {op.name, arrays_.at(from).values, std::nullopt};
          } else {
            merge_[stream] = {op.name, {}, from};
          }
          log.push_back({op.describe(), moved ? 1 : 0, {}});
          break;
        }
      }
    }
    return log;
  }

 private:
  using Key = std::pair<int, std::string>;  // context (0 for shared nodes), node
  struct Array {
    std::vector<float> values;
    bool stale = false;  // the host copy is newer
    bool newer = false;  // written on the device since it last matched the host copy
  };
  struct Merge {
    std::string node;
    std::vector<float> copy;
    std::optional<Key> streaming;
  };

  static Key key(int ctx, const std::string& node) { return {is_shared(node) ? 0 : ctx, node}; }

  void upload(const Key& k) {
    Array& array = arrays_.at(k);
    array.values = host_[k.second];
    array.stale = false;
    array.newer = false;
    if (newest_.count(k.second) && newest_.at(k.second) == k) newest_.erase(k.second);
  }
  void download(const Key& k) {
    Array& array = arrays_.at(k);
    host_[k.second] = array.values;
    array.newer = false;
    if (newest_.count(k.second) && newest_.at(k.second) == k) newest_.erase(k.second);
  }
  void written(const Key& k) {
    arrays_.at(k).stale = false;
    arrays_.at(k).newer = true;
    newest_[k.second] = k;
  }

  void run_routine(int ctx, const std::string& name) {
    static const std::map<std::string, std::vector<std::string>> kReads = {
        {"r_a", {"b", "c", "k", "t"}}, {"r_b", {"a", "b"}}, {"r_c", {"a", "b"}}, {"r_s", {"a"}},
        {"r_t", {"a", "t"}},           {"merge_a", {"a"}},  {"merge_b", {"b"}}};
    static const std::map<std::string, std::string> kWrites = {
        {"r_a", "a"}, {"r_b", "b"}, {"r_c", "c"}, {"r_s", "s"}, {"r_t", "t"}, {"merge_a", "a"}, {"merge_b", "b"}};
    for (const std::string& n : kReads.at(name)) {
      if (automatic_ && arrays_.at(key(ctx, n)).stale) upload(key(ctx, n));
    }
    auto v = [&](const std::string& n) -> std::vector<float>& { return arrays_.at(key(ctx, n)).values; };
    std::vector<float>& a = v("a");
    std::vector<float>& b = v("b");
    if (name == "r_a") {
      for (int i = 0; i < kN; ++i) a[i] = b[i] * 0.5f + v("c")[i] * 0.25f + v("k")[i] + v("t")[i] * 0.125f;
    } else if (name == "r_b") {
      for (int i = 0; i < kN; ++i) b[i] = b[i] * 0.75f + a[i] * 0.5f;
    } else if (name == "r_c") {
      for (int i = 0; i < kN; ++i) v("c")[i] = a[i] - b[i] * 0.5f;
    } else if (name == "r_s") {
      double sum = 0;
      for (int i = 0; i < kN; ++i) sum += a[i];
      v("s")[0] = static_cast<float>(sum);
    } else if (name == "r_t") {
      for (int i = 0; i < kN; ++i) v("t")[i] = v("t")[i] * 0.5f + a[i] * 0.25f;
    } else {
      const Merge& m = merge_.at(ctx % kStreams);
      EXPECT_EQ(m.node + "", name.substr(6)) << "the model's sequence merges what it copied";
      const std::vector<float> other = m.streaming ? arrays_.at(*m.streaming).values : m.copy;
      if (name == "merge_a") {
        for (int i = 0; i < kN; ++i) a[i] = (a[i] + other[i]) * 0.5f;
      } else {
        for (int i = 0; i < kN; ++i) b[i] = b[i] - other[i] * 0.25f;
      }
    }
    written(key(ctx, kWrites.at(name)));
  }

  bool automatic_;
  std::map<std::string, std::vector<float>> host_;
  std::map<Key, Array> arrays_;
  std::map<std::string, Key> newest_;  // the array written last, unless the host copy is newer
  std::map<int, Merge> merge_;         // by stream
};

// ---- Comparing ----

// The first difference between two logs; exact compares float bits, else within a tolerance.
std::optional<std::string> difference(const Log& want, const Log& got, bool exact) {
  if (want.size() != got.size()) {
    return "the logs have " + std::to_string(want.size()) + " and " + std::to_string(got.size()) + " entries";
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const Entry& w = want[i];
    const Entry& g = got[i];
    const std::string where = "entry " + std::to_string(i) + " (" + w.op + ")";
    if (w.op != g.op) return where + ": the operations differ: " + g.op;
    if (w.moved != g.moved) {
      return where + ": moved " + std::to_string(w.moved) + " vs " + std::to_string(g.moved);
    }
    if (w.values.size() != g.values.size()) return where + ": sizes differ";
    if (exact) {
      if (!same_bits(w.values, g.values)) return where + ": values differ";
      continue;
    }
    // A sum (s) of kN floats, in whatever order the kernel adds them, against one in double.
    const double floor = w.values.size() == 1 ? 5e-3 : 1e-4;
    for (size_t j = 0; j < w.values.size(); ++j) {
      if (std::fabs(w.values[j] - g.values[j]) > 1e-4 * std::fabs(w.values[j]) + floor) {
        std::ostringstream os;
        os << where << " element " << j << ": " << w.values[j] << " vs " << g.values[j];
        return os.str();
      }
    }
  }
  return std::nullopt;
}

class StressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_ASSERT_OK_AND_ASSIGN(program_, parse(kStressProgram, "stress.kiln"));
    KILN_ASSERT_OK_AND_ASSIGN(device_, cpu_device());
    KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> compiler, Backend::create(device_));
    std::vector<std::string> names;
    for (const ir::Routine& r : program_.routines) names.push_back(r.name);
    KILN_ASSERT_OK_AND_ASSIGN(code_, compiler->compile_batch(program_, names, {.shared = true, .lower = {}}));
  }

  // Runs `sequences` random sequences from `seed`, each three ways, and compares.
  void run_sequences(uint64_t seed, int sequences) {
    int operations = 0;
    for (int n = 0; n < sequences; ++n) {
      const uint64_t sequence_seed = seed * 1000003 + static_cast<uint64_t>(n);
      const std::vector<Op> ops = random_sequence(sequence_seed);
      operations += static_cast<int>(ops.size());
      const bool automatic = sequence_seed % 4 != 3;
      SCOPED_TRACE("sequence " + std::to_string(n) + " (seed " + std::to_string(sequence_seed) +
                   ", automatic transfers " + (automatic ? "on" : "off") + ")");
      const Log async = run_on_runtime(program_, device_, code_, ops, automatic, false);
      const Log serial = run_on_runtime(program_, device_, code_, ops, automatic, true);
      const Log model = Model(program_, automatic).run(ops);
      if (std::optional<std::string> d = difference(serial, async, true)) {
        ADD_FAILURE() << "asynchronous vs one at a time: " << *d;
      }
      if (std::optional<std::string> d = difference(model, serial, false)) {
        ADD_FAILURE() << "model vs one at a time: " << *d;
      }
      if (HasFailure()) {
        std::string listing;
        for (size_t i = 0; i < ops.size(); ++i) listing += "  " + std::to_string(i) + ": " + ops[i].describe() + "\n";
        ADD_FAILURE() << "the sequence:\n" << listing;
        return;
      }
    }
    RecordProperty("operations", operations);
  }

  ir::Program program_;
  hal::DeviceRef device_;
  CodeRef code_;
};

TEST_F(StressTest, RandomSequencesAgreeWithOneAtATimeAndTheModel) {
  run_sequences(1, kSanitized ? 80 : 200);
}

TEST_F(StressTest, MoreRandomSequences) {
  run_sequences(2, kSanitized ? 60 : 150);
}

}  // namespace
}  // namespace kiln::runtime_test

