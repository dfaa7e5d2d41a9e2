// `train_moons`: data-parallel training of a half-moons classifier on N streams (make demo).
//
//   train_moons [--streams N] [--epochs N] [--points N] [--device NAME[,NAME...]] [--workgroups N]
//               [--ranks] [--save FILE] [--trace FILE.json] [--trace-values FILE] [--seed N]
//               [--auto-calls 0|1] [--help]
//
// Under mpirun, `--ranks` trains data-parallel across the processes too (trainer.h): rank 0
// prints the progress and the results, the other ranks one line with their parameters'
// fingerprint.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ral/world.h"
#include "trainer.h"

namespace {

bool parse_int(std::string_view text, long long lo, long long hi, long long* out) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

constexpr const char* kUsage =
    "usage: train_moons [--streams N] [--epochs N] [--points N] [--device NAME[,NAME...]]\n"
    "                   [--workgroups N] [--ranks] [--save FILE] [--trace FILE.json]\n"
    "                   [--trace-values FILE] [--seed N] [--auto-calls 0|1]\n"
    "                   [--affinity spread|none]\n";

constexpr const char* kHelp =
    "Trains a 2-16-16-1 MLP on half-moons points, data-parallel over streams (kiln's demo).\n"
    "\n"
    "  --streams N          streams, each training on its shard of the batch (1 to 64, default 2)\n"
    "  --epochs N           epochs (1 to 100000, default 40)\n"
    "  --points N           points in the data set (1 to 10000000, default 10000; the last\n"
    "                       batch of an epoch holds what is left over)\n"
    "  --device NAME,...    the device of each stream, in turn (default cpu)\n"
    "  --workgroups N       workgroups per kernel, 0 to size them by work (default 1)\n"
    "  --ranks              under mpirun, also data-parallel across the processes: each rank\n"
    "                       trains on its share of every batch, the gradients are summed over\n"
    "                       the ranks (allreduce), every rank applies the same update; rank 0\n"
    "                       prints. Started alone: a world of one, trained as without it\n"
    "  --save FILE          write the trained parameters (w1 b1 w2 b2 w3 b3, raw f32 in that\n"
    "                       order) to FILE\n"
    "  --trace FILE.json    write a Chrome/Perfetto trace of what ran on which stream\n"
    "                       (with --ranks, {rank} in FILE of --save and --trace becomes the\n"
    "                       rank; without it only rank 0 writes FILE)\n"
    "  --trace-values FILE  log the values computed inside the routines (JSON lines)\n"
    "  --seed N             seed of the data and the initial weights (default 0)\n"
    "  --auto-calls 0|1     replace matrix products by gemm calls (default 1)\n"
    "  --affinity spread|none\n"
    "                       spread: the cpu device's streams each on a core of their own\n"
    "                       (pinned, for a machine the demo has to itself); none: where the\n"
    "                       system puts them (default spread)\n"
    "  --help               print this help\n"
    "\n"
    "Prints each epoch's loss and training accuracy (a bar redrawn in place on a terminal, else a\n"
    "line every tenth of the run), then the accuracy of the trained MLP on every point and the\n"
    "time per epoch. A run of at least the default epochs and points exits 1 if that accuracy is\n"
    "below 95% (the demo's own check); a shorter run only reports it.\n";

// The demo's own run (`make demo`): the default epochs and points. A run at least as long as it
// must reach kDemoAccuracy; a run the user shortened reports its accuracy and succeeds.
constexpr int kDemoEpochs = 40;
constexpr int kDemoPoints = 10000;
constexpr double kDemoAccuracy = 0.95;

int usage(const char* message) {
  std::fprintf(stderr, "train_moons: %s\n%s", message, kUsage);
  return 2;
}

void progress(int epoch, int epochs, double loss, double accuracy) {
  // Into a file or a pipe, a line every tenth of the run instead of a bar redrawn in place.
  if (!isatty(fileno(stdout))) {
    if ((epoch + 1) % std::max(1, epochs / 10) == 0 || epoch + 1 == epochs) {
      std::printf("epoch %3d/%d  loss %.4f  accuracy %5.1f%%\n", epoch + 1, epochs, loss, 100 * accuracy);
    }
    return;
  }
  constexpr int kWidth = 30;
  const int filled = (epoch + 1) * kWidth / epochs;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::printf("\r[%s] epoch %3d/%d  loss %.4f  accuracy %5.1f%%", bar.c_str(), epoch + 1, epochs,
              loss, 100 * accuracy);
  if (epoch + 1 == epochs) std::printf("\n");
  std::fflush(stdout);
}

// `path` with "{rank}" replaced by the rank; empty (write nothing) on ranks other than 0 when
// the path does not name the rank.
std::string rank_path(std::string path, int rank) {
  const size_t at = path.find("{rank}");
  if (at == std::string::npos) return rank == 0 ? path : std::string();
  return path.replace(at, 6, std::to_string(rank));
}

kiln::Status save_parameters(const std::string& path, const kiln::moons::TrainResult& result) {
  const std::vector<unsigned char> bytes = kiln::moons::parameter_bytes(result);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return kiln::errno_error(errno, "cannot open " + path + " for writing");
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (std::fclose(file) != 0 || !written) return kiln::unavailable_error("cannot write " + path);
  return kiln::Status();
}

}  // namespace

int main(int argc, char** argv) {
  kiln::moons::TrainOptions options;
  std::string trace_path;
  std::string value_trace_path;
  std::string save_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n%s", kUsage, kHelp);
      return 0;
    }
    if (arg == "--ranks") {
      options.ranks = true;
      continue;
    }
    if (i + 1 >= argc) return usage(("missing value after " + std::string(arg)).c_str());
    const std::string_view value = argv[++i];
    long long n = 0;
    if (arg == "--streams") {
      if (!parse_int(value, 1, 64, &n)) return usage("--streams takes an integer in [1, 64]");
      options.streams = static_cast<int>(n);
    } else if (arg == "--epochs") {
      if (!parse_int(value, 1, 100000, &n)) return usage("--epochs takes an integer in [1, 100000]");
      options.epochs = static_cast<int>(n);
    } else if (arg == "--points") {
      if (!parse_int(value, 1, 10000000, &n)) return usage("--points takes an integer in [1, 10000000]");
      options.points = static_cast<int>(n);
    } else if (arg == "--workgroups") {
      if (!parse_int(value, 0, 1 << 20, &n)) return usage("--workgroups takes an integer >= 0");
      options.max_workgroups = static_cast<uint32_t>(n);
    } else if (arg == "--seed") {
      if (!parse_int(value, 0, (1ll << 62), &n)) return usage("--seed takes a non-negative integer");
      options.seed = static_cast<uint64_t>(n);
    } else if (arg == "--device") {
      options.devices.clear();
      for (size_t start = 0; start <= value.size();) {
        size_t comma = value.find(',', start);
        if (comma == std::string_view::npos) comma = value.size();
        if (comma == start) return usage("--device takes comma-separated device names");
        options.devices.emplace_back(value.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (arg == "--auto-calls") {
      if (!parse_int(value, 0, 1, &n)) return usage("--auto-calls takes 0 or 1");
      options.auto_calls = n != 0;
    } else if (arg == "--affinity") {
      if (value != "spread" && value != "none") return usage("--affinity takes spread or none");
      options.spread_queues = value == "spread";
    } else if (arg == "--trace") {
      trace_path = value;
      options.trace = std::make_shared<kiln::runtime::Trace>();
    } else if (arg == "--trace-values") {
      value_trace_path = value;
    } else if (arg == "--save") {
      save_path = value;
    } else {
      return usage(("unknown option " + std::string(arg)).c_str());
    }
  }
  // The world first, so that only rank 0 prints from the start.
  int rank = 0, ranks = 1;
  std::string world_text;
  if (options.ranks) {
    kiln::Result<kiln::ral::World*> world = kiln::ral::world();
    if (!world.ok()) {
      std::fprintf(stderr, "train_moons: %s\n", world.status().to_string().c_str());
      return 1;
    }
    rank = (*world)->rank();
    ranks = (*world)->size();
    world_text = (*world)->describe();
  }
  trace_path = rank_path(trace_path, rank);
  value_trace_path = rank_path(value_trace_path, rank);
  save_path = rank_path(save_path, rank);
  if (trace_path.empty()) options.trace = nullptr;
  if (!value_trace_path.empty()) {
    kiln::Result<std::shared_ptr<kiln::runtime::ValueTrace>> values = kiln::runtime::ValueTrace::start();
    if (!values.ok()) {
      std::fprintf(stderr, "train_moons: %s\n", values.status().to_string().c_str());
      return 1;
    }
    options.value_trace = *values;
  }
  const bool printing = rank == 0;
  const int batch = kiln::moons::kShards * kiln::moons::kShardSize;
  if (printing) {
    std::printf("training a 2-16-16-1 MLP on %d half-moons points, batch %d in %d shards (the last batch %d), on %d stream%s\n",
                options.points, batch, ranks * kiln::moons::kShards,
                options.points % batch == 0 ? batch : options.points % batch, options.streams,
                options.streams == 1 ? "" : "s");
    if (options.ranks) {
      std::printf("across %d rank%s, %d shards each (%s)\n", ranks, ranks == 1 ? "" : "s", kiln::moons::kShards,
                  world_text.c_str());
    }
  }
  const int epochs = options.epochs;
  options.on_epoch = [&](int epoch, double loss, double accuracy) {
    if (printing) progress(epoch, epochs, loss, accuracy);
  };
  kiln::Result<kiln::moons::TrainResult> result = kiln::moons::train(options);
  if (!result.ok()) {
    std::fprintf(stderr, "\ntrain_moons: %s%s\n", ranks > 1 ? ("rank " + std::to_string(rank) + ": ").c_str() : "",
                 result.status().to_string().c_str());
    return 1;
  }
  const unsigned long long fingerprint = kiln::moons::parameter_fingerprint(*result);
  // One accuracy: the trained MLP's on every point (one run of `evaluate`, the same compiled
  // program), not the last epoch's, which was counted while the parameters still moved.
  if (printing) {
    std::printf("accuracy %.1f%%, %.2f ms per epoch (%d streams%s; the trained MLP on all %d points)\n",
                100 * result->final_accuracy, 1e3 * result->seconds / epochs, options.streams,
                !options.ranks ? "" : ranks == 1 ? " on 1 rank" : (" on each of " + std::to_string(ranks) + " ranks").c_str(),
                options.points);
  }
  // Every rank: equal fingerprints are bitwise-equal parameters.
  if (options.ranks) std::printf("rank %d of %d: parameters fingerprint %016llx\n", rank, ranks, fingerprint);
  std::fflush(stdout);
  kiln::Status written;
  if (options.trace) {
    written = options.trace->write_json(trace_path);
    if (written.ok() && printing) std::printf("trace written to %s (open it in ui.perfetto.dev)\n", trace_path.c_str());
  }
  if (written.ok() && options.value_trace) {
    written = options.value_trace->write_json_lines(value_trace_path);
    if (written.ok()) written = options.value_trace->stop();
    if (written.ok() && printing) {
      std::printf("value trace of %zu runs written to %s (read it with kiln trace-values)\n",
                  options.value_trace->run_count(), value_trace_path.c_str());
    }
  }
  if (written.ok() && !save_path.empty()) written = save_parameters(save_path, *result);
  if (!written.ok()) {
    std::fprintf(stderr, "train_moons: %s\n", written.to_string().c_str());
    return 1;
  }
  const bool demo_run = options.epochs >= kDemoEpochs && options.points >= kDemoPoints;
  if (demo_run && result->final_accuracy < kDemoAccuracy) {
    if (printing) {
      std::fprintf(stderr, "train_moons: accuracy %.1f%% is below %.0f%% after %d epochs\n",
                   100 * result->final_accuracy, 100 * kDemoAccuracy, epochs);
    }
    return 1;
  }
  return 0;
}
