// How many threads a dispatch of the cpu device runs on, chosen by measurement: its workgroups
// shared with the device's thread pool, or run alone by the thread that dispatches them. Sharing
// pays where the work is large and the other cores are free; where the work is small, bound by
// memory that one core already saturates, or the other cores are busy with someone else's work,
// the hand-offs and the wait for the slowest thread cost more than they bring.
//
// What a caller may rely on: the choice changes only which threads run the workgroups, never
// which workgroups run or what they compute, so results are the same either way. For each kernel
// and grid (Key), the first dispatch shares; where it took kLongNs or more, the hand-offs are
// nothing beside the work and every dispatch shares (a long kernel is not run alone to find out,
// which would cost a few of its runs). Otherwise kSettle more share untimed, then come a block
// of dispatches of each way (kSamples timed after one that is not), and every dispatch after
// them goes the way whose median time was lower, sharing unless running alone took at most
// kAloneWins of its time. Each way is timed in a block of its own and past a process's first
// runs because a way's first dispatch after the other pays for the switch (the pool's workers
// asleep, the data in the other core's cache): alternating, a 1 MiB slice copy timed sharing at
// 50-90 us and ran alone in 6 processes of 20 at 0.10-0.12 ms a run, against 0.017 ms shared
// (2 cores, 2026-12-02); in blocks after ten settling dispatches, none of 20 did. The
// measurement starts over after kRecheckDispatches dispatches once kRecheckNs have passed, so a
// choice follows a machine whose load changes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

class ThreadChoice {
 public:
  enum class Way { kShared, kAlone };
  // A kernel over a grid. An executable freed and another loaded at its address inherit its
  // choices until the next measurement: only speed, never results, can suffer.
  struct Key {
    const void* executable = nullptr;
    uint32_t ordinal = 0;
    uint64_t workgroups = 0;
    bool operator==(const Key&) const = default;
  };

  static constexpr int kSamples = 5;  // of each way
  static constexpr int64_t kLongNs = 1'000'000;
  static constexpr double kAloneWins = 0.9;
  static constexpr uint64_t kRecheckDispatches = 1024;
  static constexpr int64_t kRecheckNs = 2'000'000'000;
  static constexpr size_t kMaxKeys = 4096;  // past this many kernels, everything is forgotten

  struct Plan {
    Way way = Way::kShared;
    bool timed = false;  // whether to record() how long it took
  };
  static constexpr int kWarmup = 1;  // the first dispatch: timed, but not a sample of its way
  static constexpr int kSettle = 10;  // then these share untimed: a process's first runs are cold
  static constexpr int kBlock = kSamples + 1;  // then each way's: its first untimed, kSamples timed
  // Dispatches of a kernel and grid before its way is chosen (the last one's time back).
  static constexpr int kMeasured = kWarmup + kSettle + 2 * kBlock;
  // How to run the next dispatch of `key`, at time `now_ns`.
  Plan next(const Key& key, int64_t now_ns);
  // A timed dispatch of `key` run `way` took `ns`; it ended at `now_ns`.
  void record(const Key& key, Way way, int64_t ns, int64_t now_ns);

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.executable) ^ (std::hash<uint64_t>()(k.workgroups) * 31 + k.ordinal);
    }
  };
  struct Stats {
    int started = 0;  // dispatches handed out while measuring
    bool warmed_up = false;  // the first one's time came back
    std::array<std::vector<int64_t>, 2> times;  // by Way
    bool chosen = false;
    Way way = Way::kShared;  // once chosen
    uint64_t since_choice = 0;
    int64_t chosen_at_ns = 0;
  };
  static void choose(Stats& s, Way way, int64_t now_ns);

  std::mutex mutex_;
  std::unordered_map<Key, Stats, KeyHash> stats_;
};

}  // namespace kiln::cpu
