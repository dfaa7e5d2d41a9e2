#include "drivers/cpu/thread_choice.h"

#include <algorithm>

namespace kiln::cpu {

namespace {

int64_t median_ns(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

ThreadChoice::Plan ThreadChoice::next(const Key& key, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stats_.size() >= kMaxKeys && !stats_.count(key)) stats_.clear();
  Stats& s = stats_[key];
  if (s.chosen) {
    if (++s.since_choice < kRecheckDispatches || now_ns - s.chosen_at_ns < kRecheckNs) return {s.way, false};
    s = Stats{};  // measure again
  }
  // The first dispatch shares, timed; until its time is back the others share untimed. Then
  // kSettle more share untimed, then a block of each way, sharing first, each block's first
  // dispatch untimed (dispatches handed out past that, before the last time came back, are not
  // timed either).
  const int n = s.started;
  if (n == 0) {
    s.started = 1;
    return {Way::kShared, true};
  }
  if (!s.warmed_up || n >= kMeasured) return {Way::kShared, false};
  s.started++;
  if (n < kWarmup + kSettle) return {Way::kShared, false};
  const int i = n - kWarmup - kSettle;
  return {i < kBlock ? Way::kShared : Way::kAlone, i % kBlock != 0};
}

void ThreadChoice::record(const Key& key, Way way, int64_t ns, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = stats_.find(key);
  if (it == stats_.end() || it->second.chosen) return;
  Stats& s = it->second;
  if (!s.warmed_up) {
    s.warmed_up = true;
    if (ns >= kLongNs) choose(s, Way::kShared, now_ns);  // long work: not run alone to see
    return;
  }
  std::vector<int64_t>& times = s.times[way == Way::kShared ? 0 : 1];
  if (static_cast<int>(times.size()) < kSamples) times.push_back(ns);
  if (static_cast<int>(s.times[0].size()) < kSamples || static_cast<int>(s.times[1].size()) < kSamples) return;
  const int64_t shared = median_ns(s.times[0]), alone = median_ns(s.times[1]);
  choose(s, static_cast<double>(alone) <= kAloneWins * static_cast<double>(shared) ? Way::kAlone : Way::kShared,
         now_ns);
}

void ThreadChoice::choose(Stats& s, Way way, int64_t now_ns) {
  s.chosen = true;
  s.way = way;
  s.since_choice = 0;
  s.chosen_at_ns = now_ns;
}

}  // namespace kiln::cpu
