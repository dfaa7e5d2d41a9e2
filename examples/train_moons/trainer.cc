#include "trainer.h"

#include <algorithm>
#include <chrono>

#include "kiln/drivers/drivers.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"
#include "moons_program.h"

namespace kiln::moons {

namespace {

using runtime::ContextRef;
using runtime::RoutineRef;

const std::vector<std::string> kParameters = {"w1", "b1", "w2", "b2", "w3", "b3"};
// What each shard contributes to shard 0: the gradients and the loss / accuracy counts.
const std::vector<std::string> kMerged = {"gw1", "gb1", "gw2", "gb2", "gw3", "gb3", "loss", "correct"};

struct Shard {
  ContextRef context;
  std::map<std::string, RoutineRef> routines;
};

Result<std::vector<float>> read_floats(runtime::NodeTable& nodes, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(name));
  return tensor.read_as<float>();
}

Status write_floats(runtime::NodeTable& nodes, const std::string& name, const float* data, size_t count) {
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(name));
  return tensor.write(std::as_bytes(std::span<const float>(data, count)));
}

// `points` points from `first` into x and y, which binds the program's size B to `points`.
Status write_points(runtime::NodeTable& nodes, const DataSet& data, int first, int points) {
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor x, nodes.tensor("x"));
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor y, nodes.tensor("y"));
  KILN_RETURN_IF_ERROR(x.write(std::as_bytes(std::span<const float>(&data.x[2 * static_cast<size_t>(first)], 2 * static_cast<size_t>(points))),
                               {points, 2}));
  return y.write(std::as_bytes(std::span<const float>(&data.y[static_cast<size_t>(first)], static_cast<size_t>(points))), {points});
}

}  // namespace

Result<TrainResult> train(const TrainOptions& options) {
  constexpr int kBatch = kShards * kShardSize;
  if (options.streams < 1) return invalid_argument_error("--streams must be at least 1");
  if (options.epochs < 1) return invalid_argument_error("--epochs must be at least 1");
  if (options.points < 1) return invalid_argument_error("the data set needs at least one point");
  if (options.devices.empty()) return invalid_argument_error("no device given");
  TrainResult result;
  if (options.ranks) {
    KILN_ASSIGN_OR_RETURN(ral::World * world, ral::world());
    result.rank = world->rank();
    result.ranks = world->size();
  }
  if (options.static_batch && result.ranks > 1) {
    return invalid_argument_error("a static batch trains in one process (B is the whole shard of 1024)");
  }
  // The batch's pieces: rank r's shard k takes piece r * kShards + k.
  const int pieces = result.ranks * kShards;

  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(kProgramText, kProgramFile));
  if (options.static_batch) {
    if (options.points % kBatch != 0) {
      return invalid_argument_error("a static batch needs a data set that is a multiple of the batch, " +
                                    std::to_string(kBatch));
    }
    KILN_ASSIGN_OR_RETURN(program, ir::specialize_sizes(program, {kShardSize}));
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::NodeTable> nodes,
                        runtime::NodeTable::create(program, options.seed));
  // The shards of one device read one array of each parameter, which shard 0's `update` writes
  // (its stream owns them): the scheduler orders the other streams' `grad` after it, and nothing
  // is copied. Across devices each device still has its own, copied from shard 0's.
  for (const std::string& p : kParameters) KILN_RETURN_IF_ERROR(nodes->set_sharing(p, runtime::Sharing::kShared));

  // A backend per device, streams round-robin over them.
  std::vector<std::shared_ptr<runtime::Backend>> backends;
  for (const std::string& name : options.devices) {
    hal::DeviceOptions device_options;
    device_options.spread_queues = options.spread_queues;
    KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, drivers::builtin_registry().create_device(name, device_options));
    runtime::BackendOptions backend_options;
    backend_options.max_workgroups = options.max_workgroups;
    backend_options.trace = options.trace;
    backend_options.value_trace = options.value_trace;
    KILN_ASSIGN_OR_RETURN(auto backend, runtime::Backend::create(device, backend_options));
    backends.push_back(backend);
  }
  std::vector<runtime::StreamRef> streams;
  for (int s = 0; s < options.streams; ++s) {
    KILN_ASSIGN_OR_RETURN(runtime::StreamRef stream,
                          backends[s % backends.size()]->new_stream("stream " + std::to_string(s)));
    streams.push_back(stream);
  }

  // Compiled once (shared), linked into every shard's context.
  // The collectives' routine only where ranks take part (every rank must compile and run it).
  std::vector<std::string> routine_names;
  for (const ir::Routine& r : program.routines) {
    if (r.name != "allreduce_merged" || options.ranks) routine_names.push_back(r.name);
  }
  ir::LowerOptions lower;
  lower.auto_calls = options.auto_calls;
  lower.trace_values = options.value_trace != nullptr;
  if (options.value_trace) lower.trace_lines = options.value_trace->lines_per_statement();
  KILN_ASSIGN_OR_RETURN(runtime::CodeRef code,
                        backends[0]->compile_batch(program, routine_names, {.shared = true, .lower = lower}));
  std::vector<Shard> shards(kShards);
  for (int k = 0; k < kShards; ++k) {
    const runtime::StreamRef& stream = streams[k % streams.size()];
    runtime::Backend& backend = *backends[(k % streams.size()) % backends.size()];
    KILN_ASSIGN_OR_RETURN(ContextRef root,
                          backend.make_context(stream, nodes, "shard " + std::to_string(k)));
    KILN_ASSIGN_OR_RETURN(runtime::LinkedBatch linked, backend.link_batch(root, code));
    shards[k].context = linked.context;
    for (const RoutineRef& r : linked.routines) shards[k].routines[r->name()] = r;
  }

  const DataSet data = make_moons(options.points, 0.1, options.seed);
  const int steps = (options.points + kBatch - 1) / kBatch;
  const float zero = 0;
  // Every shard's points of the step and its `grad`.
  const auto run_grads = [&](int step) -> Status {
    // The batch's points, shared out over the pieces as evenly as they go (the last batch is
    // smaller); this rank's pieces follow those of the ranks before it.
    const int batch = std::min(kBatch, options.points - step * kBatch);
    const auto piece_size = [&](int piece) { return batch / pieces + (piece < batch % pieces ? 1 : 0); };
    int first = step * kBatch;
    for (int piece = 0; piece < result.rank * kShards; ++piece) first += piece_size(piece);
    for (int k = 0; k < kShards; ++k) {
      const int points = piece_size(result.rank * kShards + k);
      // Binds B; uploaded when `grad` is scheduled (automatic host transfers), snapshotting
      // these values.
      KILN_RETURN_IF_ERROR(write_points(*nodes, data, first, points));
      KILN_RETURN_IF_ERROR(shards[k].routines.at("grad")->run());
      first += points;
    }
    return Status();
  };
  // The merges into shard 0, the update there, and the new parameters to shards on other devices
  // (on shard 0's device they share its arrays: nothing moves).
  const auto run_update = [&]() -> Status {
    for (int k = 1; k < kShards; ++k) {
      for (const std::string& g : kMerged) {
        KILN_RETURN_IF_ERROR(runtime::device_to_device(g, runtime::MergeMode::kStreaming,
                                                       shards[0].context, shards[k].context)
                                 .status());
        KILN_RETURN_IF_ERROR(shards[0].routines.at("merge_" + g)->run());
      }
    }
    // Shard 0 holds this rank's sums; the same sums over every rank, in place.
    if (options.ranks) KILN_RETURN_IF_ERROR(shards[0].routines.at("allreduce_merged")->run());
    KILN_RETURN_IF_ERROR(shards[0].routines.at("update")->run());
    for (int k = 1; k < kShards; ++k) {
      for (const std::string& p : kParameters) {
        KILN_RETURN_IF_ERROR(runtime::device_to_device(p, runtime::MergeMode::kNo,
                                                       shards[k].context, shards[0].context)
                                 .status());
      }
    }
    return Status();
  };
  const auto start = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(write_floats(*nodes, "epoch_loss", &zero, 1));
  KILN_RETURN_IF_ERROR(write_floats(*nodes, "epoch_correct", &zero, 1));
  KILN_RETURN_IF_ERROR(run_grads(0));
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    for (int step = 0; step < steps; ++step) {
      KILN_RETURN_IF_ERROR(run_update());
      if (step + 1 < steps) KILN_RETURN_IF_ERROR(run_grads(step + 1));
    }
    // The epoch's totals start on their way to the host, and the next epoch's first gradients
    // are scheduled, before this thread waits for the totals: the streams go on from the last
    // update to the next step without waiting for this thread to wake up and schedule it.
    KILN_RETURN_IF_ERROR(runtime::to_host(shards[0].context, "epoch_loss").status());
    KILN_RETURN_IF_ERROR(runtime::to_host(shards[0].context, "epoch_correct").status());
    if (epoch + 1 < options.epochs) KILN_RETURN_IF_ERROR(run_grads(0));
    KILN_ASSIGN_OR_RETURN(std::vector<float> loss, read_floats(*nodes, "epoch_loss"));
    KILN_ASSIGN_OR_RETURN(std::vector<float> correct, read_floats(*nodes, "epoch_correct"));
    result.loss = loss[0] / options.points;
    result.accuracy = correct[0] / options.points;
    if (options.on_epoch) options.on_epoch(epoch, result.loss, result.accuracy);
    // The next epoch's first update adds into these (`grad` does not touch them).
    KILN_RETURN_IF_ERROR(write_floats(*nodes, "epoch_loss", &zero, 1));
    KILN_RETURN_IF_ERROR(write_floats(*nodes, "epoch_correct", &zero, 1));
  }
  for (const auto& backend : backends) KILN_RETURN_IF_ERROR(backend->await());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.static_batch) return result;
  // The whole data set in one run of the same compiled program: B = all the points.
  KILN_RETURN_IF_ERROR(write_points(*nodes, data, 0, options.points));
  KILN_RETURN_IF_ERROR(shards[0].routines.at("evaluate")->run());
  KILN_ASSIGN_OR_RETURN(std::vector<float> eval_correct, read_floats(*nodes, "eval_correct"));
  result.final_accuracy = eval_correct[0] / options.points;
  for (const std::string& p : kParameters) {
    KILN_ASSIGN_OR_RETURN(result.parameters[p], read_floats(*nodes, p));
  }
  return result;
}

std::vector<unsigned char> parameter_bytes(const TrainResult& result) {
  std::vector<unsigned char> bytes;
  for (const std::string& p : kParameters) {
    auto it = result.parameters.find(p);
    if (it == result.parameters.end()) continue;
    const auto* data = reinterpret_cast<const unsigned char*>(it->second.data());
    bytes.insert(bytes.end(), data, data + it->second.size() * sizeof(float));
  }
  return bytes;
}

uint64_t parameter_fingerprint(const TrainResult& result) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char byte : parameter_bytes(result)) hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

}  // namespace kiln::moons
