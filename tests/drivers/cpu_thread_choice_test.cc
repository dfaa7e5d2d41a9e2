// The cpu device's choice between sharing a dispatch's workgroups with the pool and running them
// alone (drivers/cpu/thread_choice.h), fed with times of our own: what it picks must follow from
// the times alone, never from the clock.
#include <gtest/gtest.h>

#include <vector>

#include "drivers/cpu/thread_choice.h"

namespace kiln::cpu {
namespace {

using Way = ThreadChoice::Way;

// Runs the measuring dispatches of `key`, one after the other, the timed ones taking `shared_ns`
// and `alone_ns` (the first, shared, too); returns the ways they were told to take and, in
// `timed`, which were timed.
std::vector<Way> measure(ThreadChoice& choice, const ThreadChoice::Key& key, int64_t shared_ns, int64_t alone_ns,
                         int64_t now = 0, std::vector<bool>* timed = nullptr) {
  std::vector<Way> ways;
  for (int i = 0; i < ThreadChoice::kMeasured; ++i) {
    const ThreadChoice::Plan plan = choice.next(key, now);
    ways.push_back(plan.way);
    if (timed) timed->push_back(plan.timed);
    if (plan.timed) choice.record(key, plan.way, plan.way == Way::kShared ? shared_ns : alone_ns, now);
  }
  return ways;
}

TEST(ThreadChoiceTest, WarmsUpSettlesThenTimesEachWayInABlock) {
  ThreadChoice choice;
  std::vector<bool> timed;
  const std::vector<Way> ways = measure(choice, {&choice, 0, 8}, 100, 100, 0, &timed);
  // The first, timed; kSettle untimed; then each way's block, its first dispatch untimed.
  std::vector<Way> expected(ThreadChoice::kWarmup + ThreadChoice::kSettle, Way::kShared);
  std::vector<bool> expected_timed(ThreadChoice::kWarmup, true);
  expected_timed.resize(ThreadChoice::kWarmup + ThreadChoice::kSettle, false);
  for (const Way way : {Way::kShared, Way::kAlone}) {
    expected.insert(expected.end(), ThreadChoice::kSamples + 1, way);
    expected_timed.push_back(false);
    expected_timed.insert(expected_timed.end(), ThreadChoice::kSamples, true);
  }
  EXPECT_EQ(ways, expected);
  EXPECT_EQ(timed, expected_timed);
  // Chosen: the next ones are untimed.
  EXPECT_FALSE(choice.next({&choice, 0, 8}, 0).timed);
}

TEST(ThreadChoiceTest, UntilTheFirstTimeIsBackDispatchesShareUntimed) {
  ThreadChoice choice;
  const ThreadChoice::Key key{&choice, 0, 8};
  EXPECT_TRUE(choice.next(key, 0).timed);
  for (int i = 0; i < 3; ++i) {
    const ThreadChoice::Plan plan = choice.next(key, 0);
    EXPECT_EQ(plan.way, Way::kShared);
    EXPECT_FALSE(plan.timed);
  }
  choice.record(key, Way::kShared, 1000, 0);
  // The settling dispatches and the shared block's first, untimed; then the measurement begins.
  for (int i = 0; i < ThreadChoice::kSettle + 1; ++i) EXPECT_FALSE(choice.next(key, 0).timed) << i;
  EXPECT_TRUE(choice.next(key, 0).timed);
}

TEST(ThreadChoiceTest, LongWorkSharesWithoutRunningAlone) {
  ThreadChoice choice;
  const ThreadChoice::Key key{&choice, 0, 8};
  const ThreadChoice::Plan first = choice.next(key, 0);
  ASSERT_TRUE(first.timed);
  choice.record(key, first.way, ThreadChoice::kLongNs, 0);
  for (int i = 0; i < 20; ++i) {
    const ThreadChoice::Plan plan = choice.next(key, 0);
    EXPECT_EQ(plan.way, Way::kShared);
    EXPECT_FALSE(plan.timed);
  }
}

TEST(ThreadChoiceTest, RunsAloneOnlyWhereThatIsClearlyFaster) {
  ThreadChoice choice;
  const ThreadChoice::Key faster_alone{&choice, 0, 8}, level{&choice, 1, 8}, faster_shared{&choice, 2, 8};
  measure(choice, faster_alone, 1000, 600);
  measure(choice, level, 1000, 950);  // within kAloneWins: sharing stays
  measure(choice, faster_shared, 600, 1000);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(choice.next(faster_alone, 0).way, Way::kAlone);
    EXPECT_FALSE(choice.next(level, 0).timed);
    EXPECT_EQ(choice.next(level, 0).way, Way::kShared);
    EXPECT_EQ(choice.next(faster_shared, 0).way, Way::kShared);
  }
}

TEST(ThreadChoiceTest, KernelsAndGridsAreChosenApart) {
  ThreadChoice choice;
  int other = 0;
  measure(choice, {&choice, 0, 8}, 1000, 100);
  // The same export over another grid, and another executable, start measuring afresh.
  EXPECT_TRUE(choice.next({&choice, 0, 16}, 0).timed);  // its first dispatch, timed
  EXPECT_TRUE(choice.next({&other, 0, 8}, 0).timed);
  EXPECT_EQ(choice.next({&choice, 0, 8}, 0).way, Way::kAlone);
}

TEST(ThreadChoiceTest, MeasuresAgainAfterEnoughDispatchesAndTime) {
  ThreadChoice choice;
  const ThreadChoice::Key key{&choice, 0, 8};
  measure(choice, key, 1000, 100, /*now=*/0);
  // Many dispatches but little time: the choice stands.
  for (uint64_t i = 0; i < 2 * ThreadChoice::kRecheckDispatches; ++i) ASSERT_EQ(choice.next(key, 1).way, Way::kAlone);
  // Enough of both: measured again, and the machine has changed.
  const std::vector<Way> again = measure(choice, key, 100, 1000, ThreadChoice::kRecheckNs + 1);
  EXPECT_EQ(again.front(), Way::kShared);
  EXPECT_EQ(choice.next(key, ThreadChoice::kRecheckNs + 2).way, Way::kShared);
}

}  // namespace
}  // namespace kiln::cpu
