// --decode-groups auto's measured trials (DecodeGroupTrials, and DecodeGroupRetuner around them): a
// simulated run whose decode rate depends on the group count, fed as the scheduler would feed it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/planning_shapes.h"
#include "planning/decode_group_retune.h"
#include "planning/decode_group_trials.h"

namespace {

using glacier::planning::DecodeGroupRetuner;
using glacier::planning::DecodeGroupTrials;
using glacier::planning::DecodeProgress;
using glacier::testing::hop_bound_pair;

// A run of `live` sequences whose decode steps go out at rate[G] a second at G groups: each micro-batch
// holds ceil(live / G) decode steps and takes their share of the time. `drift` lowers every rate by
// that fraction for each window's worth of steps already sent (longer contexts), and `host`, when
// set, gives a factor for each micro-batch's time (a shared host's slow and fast spells).
class SimulatedRun {
 public:
  SimulatedRun(int live, std::map<int, double> rate, double drift = 0.0, std::function<double()> host = {})
      : rate_(std::move(rate)), drift_(drift), host_(std::move(host)) {
    p_.live = live;
  }
  // Asks `choose` for the groups of the next micro-batch, then sends it.
  template <class Choose>
  int step(Choose&& choose) {
    const int groups = choose(p_);
    const int rows = (p_.live + groups - 1) / groups;
    const double windows_sent =
        static_cast<double>(p_.decode_steps) / (glacier::planning::kTrialWindowRounds * p_.live);
    const double rate = rate_.at(groups) * (1.0 - drift_ * windows_sent);
    const double factor = host_ ? host_() : 1.0;
    p_.decode_steps += rows;
    p_.seconds += rows / rate * factor;
    return groups;
  }
  // The same at the groups `trials` choose: the scheduler's loop under --decode-groups auto's trials.
  int step(DecodeGroupTrials& trials) {
    return step([&](const DecodeProgress& p) { return trials.observe(p); });
  }
  DecodeProgress& progress() { return p_; }

 private:
  std::map<int, double> rate_;
  double drift_;
  std::function<double()> host_;
  DecodeProgress p_;
};

// Runs micro-batches until `trials` settle (or a bound, which fails the test).
void run_until_settled(DecodeGroupTrials& trials, SimulatedRun& run) {
  for (int i = 0; i < 100000 && !trials.settled(); ++i) run.step(trials);
  ASSERT_TRUE(trials.settled());
}

// Trials from `groups` over [lowest, highest] in steps of `step`, fed by `run` until they settle.
DecodeGroupTrials settled_trials(SimulatedRun& run, int32_t groups, int32_t lowest, int32_t highest, int32_t step) {
  DecodeGroupTrials trials(groups, lowest, highest, step, run.progress());
  run_until_settled(trials, run);
  return trials;
}

std::vector<int> tried_counts(const DecodeGroupTrials& t) {
  std::vector<int> g;
  for (const auto& w : t.trials()) g.push_back(w.groups);
  return g;
}

TEST(DecodeGroupTrials, ClimbsWhileEachStepUpGains) {
  SimulatedRun run(64, {{4, 1000.0}, {6, 1300.0}, {8, 1400.0}});
  const DecodeGroupTrials t = settled_trials(run, 4, 4, 8, 2);
  EXPECT_EQ(t.groups(), 8);
  // Each comparison: the incumbent, the candidate twice, the incumbent again.
  EXPECT_EQ(tried_counts(t), (std::vector<int>{4, 6, 6, 4, 6, 8, 8, 6}));
  EXPECT_NEAR(t.trials()[1].steps_per_second, 1300.0, 1e-6);
  EXPECT_NEAR(t.start_rate(), 1000.0, 1e-6);
  EXPECT_NEAR(t.best_rate(), 1400.0, 1e-6);
}

TEST(DecodeGroupTrials, KeepsTheStartWhenNeitherNeighbourGains) {
  SimulatedRun run(64, {{4, 1000.0}, {6, 1100.0}, {8, 1000.0}});
  const DecodeGroupTrials t = settled_trials(run, 6, 4, 8, 2);
  EXPECT_EQ(t.groups(), 6);
  EXPECT_EQ(tried_counts(t), (std::vector<int>{6, 8, 8, 6, 6, 4, 4, 6}));
}

TEST(DecodeGroupTrials, TriesFewerWhenTheFirstStepUpLoses) {
  SimulatedRun run(64, {{4, 1200.0}, {6, 1000.0}, {8, 900.0}});
  const DecodeGroupTrials t = settled_trials(run, 6, 4, 8, 2);
  EXPECT_EQ(t.groups(), 4);
  EXPECT_EQ(t.best_groups(), 4);
}

TEST(DecodeGroupTrials, AGainWithinTheNoiseBarIsNotKept) {
  const double just_below = 1000.0 * (1.0 + glacier::planning::kTrialGain) - 1.0;
  SimulatedRun run(64, {{4, 1000.0}, {6, just_below}});
  const DecodeGroupTrials t = settled_trials(run, 4, 4, 6, 2);
  EXPECT_EQ(t.groups(), 4);
}

// A wave whose rate falls 3% a window: measured one after the other, a candidate 6% faster would read
// as about 3% (and lose to the bar); the incumbent's windows on both sides of it cancel the drift.
TEST(DecodeGroupTrials, ASteadyDriftCancels) {
  SimulatedRun faster(64, {{4, 1000.0}, {6, 1060.0}}, 0.03);
  const DecodeGroupTrials gains = settled_trials(faster, 4, 4, 6, 2);
  EXPECT_EQ(gains.groups(), 6);
  SimulatedRun same(64, {{4, 1000.0}, {6, 1000.0}}, 0.03);
  const DecodeGroupTrials ties = settled_trials(same, 4, 4, 6, 2);
  EXPECT_EQ(ties.groups(), 4);
}

// Trials of 4 groups (1000 steps/s) against 6 (`candidate` steps/s) on a host that runs `factor` times
// as slow during window `spell` only; settled after their one comparison.
DecodeGroupTrials trials_with_spell(double candidate, size_t spell, double factor) {
  const DecodeGroupTrials* trials = nullptr;
  SimulatedRun run(64, {{4, 1000.0}, {6, candidate}}, 0.0,
                   [&] { return trials->trials().size() == spell ? factor : 1.0; });
  DecodeGroupTrials t(4, 4, 6, 2, run.progress());
  trials = &t;
  run_until_settled(t, run);
  EXPECT_EQ(t.trials().size(), 4u);
  return t;
}

// The host runs 25% faster during the candidate's first window only: the candidate's two windows then
// disagree with the drift the incumbent's show (none), by more than its 6% gain, so it does not win.
TEST(DecodeGroupTrials, AFastSpellOfTheHostDoesNotWin) {
  const DecodeGroupTrials t = trials_with_spell(1060.0, 1, 0.8);
  ASSERT_EQ(t.trials().size(), 4u);
  EXPECT_GT(t.trials()[1].steps_per_second, 1.2 * t.trials()[0].steps_per_second) << "the spell is measured";
  EXPECT_EQ(t.groups(), 4);
}

// The host runs 25% slower during the incumbent's second window only, the two counts being equal: the
// incumbent's mean reads 10% low, above the scatter the windows show (7%), but the candidate does not
// lead in the first half, so it does not win.
TEST(DecodeGroupTrials, ASlowSpellInTheIncumbentsWindowDoesNotWin) {
  const DecodeGroupTrials t = trials_with_spell(1000.0, 3, 1.25);
  ASSERT_EQ(t.trials().size(), 4u);
  EXPECT_LT(t.trials()[3].steps_per_second, 0.85 * t.trials()[0].steps_per_second) << "the spell is measured";
  EXPECT_EQ(t.groups(), 4);
}

TEST(DecodeGroupTrials, WindowsSpanTheirRoundsAndAChangeWarmsUpFirst) {
  SimulatedRun run(64, {{4, 1000.0}, {6, 1000.0}});
  DecodeGroupTrials t(4, 4, 6, 2, run.progress());
  // The first window (the starting count, already in use) opens after kTrialWarmUpRounds rounds and
  // spans kTrialWindowRounds rounds of 64 steps, 4 micro-batches of 16 a round.
  const int first = (glacier::planning::kTrialWarmUpRounds + glacier::planning::kTrialWindowRounds) * 4;
  for (int mb = 0; mb < first; ++mb) EXPECT_EQ(run.step(t), 4);
  EXPECT_TRUE(t.trials().empty());
  EXPECT_EQ(run.step(t), 6);
  ASSERT_EQ(t.trials().size(), 1u);
  EXPECT_NEAR(t.trials()[0].steps_per_second, 1000.0, 1e-6);
  // The candidate's window opens only after kTrialWarmUpRounds rounds at its count.
  const int64_t switched_at = run.progress().decode_steps - 11;  // its first micro-batch held 11 rows
  while (t.trials().size() < 2) run.step(t);
  const int64_t window_steps = static_cast<int64_t>(glacier::planning::kTrialWindowRounds) * 64;
  EXPECT_GE(run.progress().decode_steps - switched_at,
            window_steps + static_cast<int64_t>(glacier::planning::kTrialWarmUpRounds) * 64);
}

TEST(DecodeGroupTrials, PrefillInAWindowReopensItAfterAWarmUp) {
  SimulatedRun run(64, {{4, 1000.0}, {6, 1000.0}});
  DecodeGroupTrials t(4, 4, 6, 2, run.progress());
  for (int mb = 0; mb < 8; ++mb) run.step(t);
  // A new prompt's prefill (more than kTrialMaxPrefillShare of the window's steps) and a slow stretch.
  run.progress().prompt_tokens += 200;
  run.progress().seconds += 5.0;
  run.step(t);
  // Then the new sequence's wait for its first token, while its prefill crosses the ring.
  run.progress().seconds += 5.0;
  for (int mb = 0; mb < 200 && t.trials().empty(); ++mb) run.step(t);
  ASSERT_EQ(t.trials().size(), 1u);
  EXPECT_NEAR(t.trials()[0].steps_per_second, 1000.0, 1e-6) << "the prefill and the wait after it were discarded";
}

TEST(DecodeGroupTrials, TheFirstWindowWaitsForTheFirstTokens) {
  // Trials start with the first admitted sequences; their decode steps go out only once their prefill
  // has crossed the ring, a wait that says nothing of the group count.
  SimulatedRun run(64, {{4, 1000.0}, {6, 1000.0}});
  DecodeGroupTrials t(4, 4, 6, 2, run.progress());
  EXPECT_EQ(t.observe(run.progress()), 4);
  run.progress().seconds += 2.0;
  for (int mb = 0; mb < 200 && t.trials().empty(); ++mb) run.step(t);
  ASSERT_EQ(t.trials().size(), 1u);
  EXPECT_NEAR(t.trials()[0].steps_per_second, 1000.0, 1e-6) << "the wait for the first tokens was measured";
}

TEST(DecodeGroupTrials, ARangeOfOneCountTriesNothing) {
  SimulatedRun run(4, {{4, 1000.0}});
  DecodeGroupTrials t(4, 4, 4, 2, run.progress());
  EXPECT_TRUE(t.settled());
  EXPECT_EQ(run.step(t), 4);
  EXPECT_THROW(DecodeGroupTrials(4, 4, 8, 0, run.progress()), std::invalid_argument);
  EXPECT_THROW(DecodeGroupTrials(4, 6, 5, 1, run.progress()), std::invalid_argument);
}

// The retuner runs the trials around the rule's choices (hop_bound_pair: 4 groups for 16 live sequences,
// 8 for 8), and records a trial's win as a measured re-tune.
TEST(DecodeGroupRetunerTrials, RecordsAMeasuredWinAndRestartsAtANewLiveCount) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  // Before anything is admitted the start-up choice holds and no trial starts.
  EXPECT_EQ(r.groups_for(DecodeProgress{}), 4);
  EXPECT_TRUE(r.trials().empty());
  SimulatedRun run(16, {{2, 500.0}, {3, 600.0}, {4, 1000.0}, {5, 1500.0}, {6, 1500.0}, {7, 1500.0}, {8, 1500.0}});
  for (int i = 0; i < 1000 && r.retunes().empty(); ++i) run.step([&](const DecodeProgress& p) { return r.groups_for(p); });
  ASSERT_EQ(r.retunes().size(), 1u);
  const auto& win = r.retunes()[0];
  EXPECT_TRUE(win.measured);
  EXPECT_EQ(win.from, 4);
  EXPECT_EQ(win.to, 5);  // 6 is not 3% above 5
  EXPECT_NEAR(win.from_rate, 1000.0, 1e-6);
  EXPECT_NEAR(win.to_rate, 1500.0, 1e-6);
  EXPECT_EQ(r.groups(), 5);
  EXPECT_GE(r.trials().size(), 3u);
  // Half the live sequences: the rule's re-choice (8 for 8), recorded from the measured 5.
  run.progress().live = 8;
  EXPECT_EQ(run.step([&](const DecodeProgress& p) { return r.groups_for(p); }), 8);
  ASSERT_EQ(r.retunes().size(), 2u);
  EXPECT_FALSE(r.retunes()[1].measured);
  EXPECT_EQ(r.retunes()[1].from, 5);
  EXPECT_EQ(r.retunes()[1].to, 8);
}

}  // namespace
