// The cpu device's choice between sharing a dispatch's workgroups with the pool and running them
// alone (drivers/cpu/thread_choice.h), fed with times of our own: what it picks must follow from
// the times alone, never from the clock.
#include <gtest/gtest.h>

#include <vector>

#include "drivers/cpu/thread_choice.h"

namespace kiln::cpu {
namespace {

using Way = ThreadChoice::Way;

// Runs the measuring dispatches of `key`, one after the other, with `shared_ns` and `alone_ns` as
// their times (the first, shared, too); returns the ways they were told to take.
std::vector<Way> measure(ThreadChoice& choice, const ThreadChoice::Key& key, int64_t shared_ns, int64_t alone_ns,
                         int64_t now = 0) {
  std::vector<Way> ways;
  for (int i = 0; i < ThreadChoice::kWarmup + 2 * ThreadChoice::kSamples; ++i) {
    const ThreadChoice::Plan plan = choice.next(key, now);
    ways.push_back(plan.way);
    EXPECT_TRUE(plan.timed) << "dispatch " << i;
    if (plan.timed) choice.record(key, plan.way, plan.way == Way::kShared ? shared_ns : alone_ns, now);
  }
  return ways;
}

TEST(ThreadChoiceTest, WarmsUpThenAlternatesSharingFirst) {
  ThreadChoice choice;
  const std::vector<Way> ways = measure(choice, {&choice, 0, 8}, 100, 100);
  std::vector<Way> expected(ThreadChoice::kWarmup, Way::kShared);
  for (int i = 0; i < ThreadChoice::kSamples; ++i) expected.insert(expected.end(), {Way::kShared, Way::kAlone});
  EXPECT_EQ(ways, expected);
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
  EXPECT_TRUE(choice.next(key, 0).timed);  // the measurement begins
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
