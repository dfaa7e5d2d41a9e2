// Data-parallel training of a half-moons classifier on kiln's runtime: the main job of
// `make demo` (examples/train_moons/main.cc), also used by the runtime's tests and benchmarks.
//
// The batch (2048 points) is split into shards of 1024 (examples/kiln/moons_mlp.kiln); the last
// batch of an epoch holds what is left (the data set need not be a multiple of the batch), split
// as evenly as it goes. The shard's size is the program's size B, bound by the shape of the data
// written: one compiled program runs every shard, and then, once training is done, `evaluate`
// over the whole data set in one run. Shard k has its own context on stream k % streams; every
// step each shard computes its gradients, the other shards' gradients are added into shard 0's
// through merge buffers (`g += g.merge`), and shard 0 applies the update. The shards on shard 0's
// device share its parameters (one array each, Sharing::kShared: the scheduler orders their next
// `grad` after the update); shards on other devices get them copied. Each epoch's totals go to
// the host while the next epoch's first gradients are already scheduled, so that the streams
// never wait for the host at an epoch's end. With `streams = 1` the same shards run one after the
// other on one stream: the same arithmetic, so the same parameters, in one stream's time.
//
// Across processes (`ranks`, train_moons --ranks under mpirun): rank r of R takes its share of
// every batch (the batch is split into R × kShards pieces, rank r's shard k taking piece
// r·kShards + k), its shards merge into its shard 0 as above, and `allreduce_merged` (a routine of
// `call allreduce` statements) then sums shard 0's gradients and counts over the ranks in place.
// Every rank then holds the same sums and applies the same update: the parameters stay bitwise
// identical on every rank, and each step sums the gradients of the same 2048 points as one
// process does (in another order, so to within rounding).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/runtime/trace.h"
#include "kiln/runtime/value_trace.h"

namespace kiln::moons {

inline constexpr int kShardSize = 1024;
inline constexpr int kShards = 2;

// `count` points of the two interleaved half circles with Gaussian noise, shuffled; labels 0/1.
struct DataSet {
  std::vector<float> x;  // count × 2
  std::vector<float> y;  // count
  int count() const { return static_cast<int>(y.size()); }
};
DataSet make_moons(int count, double noise, uint64_t seed);

struct TrainOptions {
  int streams = 2;
  int epochs = 40;
  int points = 10000;  // any number (the last batch of an epoch is smaller)
  uint64_t seed = 0;
  // The devices the streams go on, round-robin ("cpu", "opencl", "cpu:1", ...).
  std::vector<std::string> devices = {"cpu"};
  // Workgroups per kernel (BackendOptions::max_workgroups): 1 makes each stream one core, as in
  // OCANNL's multicore backend; 0 splits every kernel over the device's workers.
  uint32_t max_workgroups = 1;
  // Products by the RAL's gemm (OpenBLAS) where lowering finds them (ir::LowerOptions::auto_calls).
  bool auto_calls = true;
  // The cpu device's streams each pinned to a core of their own (DeviceOptions::spread_queues):
  // the demo is meant to have the machine to itself, a stream to a core. Left to the system, two
  // streams' threads sometimes share one core for a whole run (docs/hal.md).
  bool spread_queues = true;
  // The program specialized to B = kShardSize before compiling (for benchmarks against the
  // general build): the data set must then be a multiple of the batch, and `evaluate` is not run.
  bool static_batch = false;
  // Data-parallel across the ranks of the process's world (kiln/ral/world.h) too: under mpirun,
  // rank r trains on its share of every batch (above); started alone, a world of one, the same
  // training as without it.
  bool ranks = false;
  std::shared_ptr<runtime::Trace> trace;
  // When set, the routines are compiled with value tracing and log into it (docs/tracing.md).
  std::shared_ptr<runtime::ValueTrace> value_trace;
  // Called after each epoch with its mean loss and accuracy on the training set.
  std::function<void(int epoch, double loss, double accuracy)> on_epoch;
};

struct TrainResult {
  std::map<std::string, std::vector<float>> parameters;  // w1 b1 w2 b2 w3 b3
  double loss = 0;      // of the last epoch
  double accuracy = 0;  // of the last epoch, on the training set
  // Of the trained parameters on the whole data set, counted by one run of `evaluate`.
  double final_accuracy = 0;
  double seconds = 0;   // training time, epochs only (no compiling, linking or the evaluation)
  int rank = 0;         // this process's rank and the number of ranks (1 without `ranks`)
  int ranks = 1;
};

Result<TrainResult> train(const TrainOptions& options);

// The parameters' bytes (w1 b1 w2 b2 w3 b3, in that order, as stored), and a 64-bit FNV-1a hash
// of them: equal on every rank of a job, and equal to another run's when training was bitwise
// the same.
std::vector<unsigned char> parameter_bytes(const TrainResult& result);
uint64_t parameter_fingerprint(const TrainResult& result);

}  // namespace kiln::moons
