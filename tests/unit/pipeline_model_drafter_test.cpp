// The draft model's proposals (--speculate draft:PATH): a synthetic model run on its own local ring
// proposes exactly its greedy continuation of the history, whatever it held in the slot before
// (rejected drafts, another sequence's tokens), in micro-batches smaller than the history.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/stage_harness.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"
#include "pipeline/local_ring.h"
#include "pipeline/model_drafter.h"

namespace {

using glacier::testing::StageHarness;
using Tokens = std::vector<int32_t>;

constexpr int32_t kSlots = 2;
constexpr int32_t kCtx = 64;
constexpr int32_t kUbatch = 5;  // shorter than the histories: the drafter feeds them in several chunks

std::string model_path() {
  glacier::model::SyntheticModelSpec spec = glacier::model::synthetic_preset("tiny");
  spec.seed = 23;
  return glacier::testing::synthetic_model_once(spec, "model-drafter");
}

// A drafter on a fresh stage of the model.
struct Drafter {
  StageHarness h{model_path(), {}, kUbatch, kSlots, kCtx};
  glacier::pipeline::LocalRing ring{*h.stages[0], 1};
  glacier::pipeline::ModelDrafter drafter{ring, kSlots, kCtx, kUbatch};
  Tokens propose(int32_t slot, const Tokens& history, int32_t max_draft) {
    Tokens d;
    const int32_t n = drafter.propose(slot, history, max_draft, d);
    EXPECT_EQ(n, static_cast<int32_t>(d.size()));
    return d;
  }
};

// The model's own greedy continuation, through the scheduler on another stage (an independent path).
Tokens greedy(const Tokens& history, int32_t n) {
  StageHarness h(model_path(), {}, 512, 1, kCtx);
  return h.greedy({history}, n, {})[0];
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Tokens kPromptA = {1, 17, 33, 5, 60, 61, 62, 8, 9, 40, 41, 3};
const Tokens kPromptB = {1, 70, 71, 72, 73, 74, 75};

TEST(ModelDrafter, ProposesTheModelsGreedyContinuation) {
  Drafter d;
  const Tokens want = greedy(kPromptA, 6);
  ASSERT_EQ(want.size(), 6u);
  EXPECT_EQ(d.propose(0, kPromptA, 6), want);
  EXPECT_EQ(d.propose(1, kPromptA, 3), Tokens(want.begin(), want.begin() + 3));
  EXPECT_EQ(d.drafter.tokens_computed(), 2 * static_cast<int64_t>(kPromptA.size()) + 5 + 2);
}

TEST(ModelDrafter, RejectedDraftsAndOtherSequencesLeaveNoTrace) {
  Drafter d;
  const Tokens first = d.propose(0, kPromptA, 4);
  ASSERT_EQ(first.size(), 4u);
  // The target kept two drafts and chose its own token after them: the slot's later rows are stale.
  const int32_t own = first[2] == 5 ? 6 : 5;
  const Tokens history = concat(kPromptA, {first[0], first[1], own});
  const int64_t before = d.drafter.tokens_computed();
  EXPECT_EQ(d.propose(0, history, 4), greedy(history, 4));
  // Only the tokens past the common prefix were computed again: `own` and 3 fed-back drafts.
  EXPECT_EQ(d.drafter.tokens_computed() - before, 1 + 3);
  // Another sequence in the slot shares only BOS with the rows there; then the first sequence returns.
  EXPECT_EQ(d.propose(0, kPromptB, 5), greedy(kPromptB, 5));
  const Tokens longer = concat(history, {5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(d.propose(0, longer, 5), greedy(longer, 5));
  Drafter fresh;
  EXPECT_EQ(fresh.propose(1, longer, 5), greedy(longer, 5));
}

TEST(ModelDrafter, DraftsStopAtTheContext) {
  Drafter d;
  Tokens history(static_cast<size_t>(kCtx - 2), 7);
  history[0] = 1;
  // Drafts 1 .. k-1 are fed back at positions kCtx - 2 .. : two fit (the second is never fed).
  EXPECT_EQ(d.propose(0, history, 8).size(), 3u);
  history.resize(static_cast<size_t>(kCtx), 7);
  EXPECT_EQ(d.propose(0, history, 8).size(), 1u);
  EXPECT_TRUE(d.propose(1, {}, 4).empty());
}

}  // namespace
