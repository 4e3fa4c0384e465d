// The scheduler's decode groups over a ring that returns micro-batches in order after a fixed number in
// flight: decode steps go out in groups of the size the group count asks for, whatever cohorts the
// prefill or an earlier count left behind.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "pipeline/ring.h"
#include "pipeline/scheduler.h"

namespace {

using namespace glacier;

// Returns each micro-batch's result (a token for every chunk that samples) in submission order, and
// records how many decode steps each decode-only micro-batch carried.
class FifoRing : public pipeline::Ring {
 public:
  int n_stages() const override { return 4; }
  void submit(const compute::MicroBatch& mb) override {
    compute::MicroBatchResult r;
    r.id = mb.id;
    bool prompt = false;
    for (const compute::Chunk& c : mb.chunks) {
      compute::ChunkResult cr;
      cr.seq = c.seq;
      if (c.output == compute::OutputKind::Sample) cr.token = 7;
      prompt = prompt || c.n_tokens > 1 || c.starts_sequence;
      r.chunks.push_back(cr);
    }
    if (!prompt) decode_rows.push_back(static_cast<int>(mb.chunks.size()));
    pending_.push_back(std::move(r));
  }
  bool poll(compute::MicroBatchResult& out, bool /*wait*/) override {
    if (pending_.empty()) return false;
    out = std::move(pending_.front());
    pending_.pop_front();
    return true;
  }
  std::vector<int> decode_rows;  // per decode-only micro-batch, in the order sent

 private:
  std::deque<compute::MicroBatchResult> pending_;
};

constexpr int kSequences = 16;
constexpr int kNewTokens = 24;

// 16 prompts of 6 tokens with micro-batches of 20 tokens: the prefill reaches the ring in cohorts of
// 3 and 4 sequences (and one of 1), none a group of 4.
void add_prompts(pipeline::Scheduler& s) {
  for (int i = 0; i < kSequences; ++i) {
    pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens = {1, 10 + i, 20 + i, 30 + i, 40 + i, 50 + i};
    r.max_new_tokens = kNewTokens;
    r.prompt_key = 100 + static_cast<uint64_t>(i);
    s.add(std::move(r));
  }
}

pipeline::SchedulerOptions options(int32_t groups) {
  pipeline::SchedulerOptions o;
  o.n_slots = kSequences;
  o.n_ctx = 64;
  o.ubatch = 20;
  o.max_in_flight = 8;
  o.decode_groups = groups;
  return o;
}

TEST(DecodeRegroup, PrefillCohortsBecomeFullGroups) {
  FifoRing ring;
  int finished = 0;
  pipeline::Scheduler s(options(4), ring, {}, [&](pipeline::SequenceOutcome&& o) {
    EXPECT_EQ(o.generated.size(), static_cast<size_t>(kNewTokens));
    ++finished;
  });
  add_prompts(s);
  s.run();
  EXPECT_EQ(finished, kSequences);
  // Every sequence decodes kNewTokens - 1 steps (its first token comes with the prefill). After the first
  // round, while all 16 are still decoding, every group holds 16 / 4 rows.
  int steps = 0;
  for (int rows : ring.decode_rows) steps += rows;
  EXPECT_EQ(steps, kSequences * (kNewTokens - 1));
  const size_t settled_from = 8, settled_to = 4 * (kNewTokens - 3);
  ASSERT_GT(ring.decode_rows.size(), settled_to);
  for (size_t i = settled_from; i < settled_to; ++i) EXPECT_EQ(ring.decode_rows[i], 4) << "decode micro-batch " << i;
}

TEST(DecodeRegroup, AChangeOfCountRegroupsTheSteps) {
  FifoRing ring;
  pipeline::Scheduler s(options(8), ring, {}, [](pipeline::SequenceOutcome&&) {});
  // 8 groups of 2 until 96 decode steps have gone out, then 4 groups of 4.
  s.set_decode_groups_policy([](const pipeline::Scheduler::DecodeGroupsQuery& q) { return q.decode_steps_sent < 96 ? 8 : 4; });
  add_prompts(s);
  s.run();
  int sent = 0;
  size_t change = 0;
  for (size_t i = 0; i < ring.decode_rows.size() && sent < 96; ++i, change = i) sent += ring.decode_rows[i];
  for (size_t i = 16; i < change; ++i) EXPECT_EQ(ring.decode_rows[i], 2) << "decode micro-batch " << i;
  // The micro-batches of 2 already in the ring come back and are sent on as groups of 4.
  const size_t regrouped = change + 8;
  ASSERT_GT(ring.decode_rows.size(), regrouped + 20);
  for (size_t i = regrouped; i < regrouped + 20; ++i) EXPECT_EQ(ring.decode_rows[i], 4) << "decode micro-batch " << i;
}

}  // namespace
