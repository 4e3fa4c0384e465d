// The per-sequence sampling controls against hand-computed rows: logit_bias, the min_tokens mask, the
// repetition, presence and frequency penalties; the last stage's per-slot counts (prompt vs output,
// reset on slot reuse); the log-prob of the processed row; and the settings' trip through the wire.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "compute/logits_processing.h"
#include "compute/sampler.h"
#include "pipeline/wire.h"

using namespace glacier::compute;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LogitsProcessing, LogitBiasIsAdded) {
  SequenceLogitState s;
  const std::vector<TokenBias> bias = {{0, -100.0f}, {2, 1.5f}};
  s.set_biases(bias.data(), 2);
  std::vector<float> l = {0.25f, 0.5f, -1.0f};
  s.apply(l.data(), 3, SamplingParams{}, 0);
  EXPECT_EQ(l, (std::vector<float>{-99.75f, 0.5f, 0.5f}));
}

TEST(LogitsProcessing, MinTokensMasksItsIdsOnlyBeforeTheCount) {
  SequenceLogitState s;
  const std::vector<int32_t> mask = {1, 3};
  s.set_min_mask(mask.data(), 2);
  SamplingParams p;
  p.min_tokens = 2;
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 4.0f};
  s.apply(l.data(), 4, p, 1);  // one output token so far: still masked
  EXPECT_EQ(l, (std::vector<float>{1.0f, -kInf, 3.0f, -kInf}));
  std::vector<float> free_row = {1.0f, 2.0f, 3.0f, 4.0f};
  s.apply(free_row.data(), 4, p, 2);  // two output tokens: min_tokens reached
  EXPECT_EQ(free_row, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
}

TEST(LogitsProcessing, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  SequenceLogitState s;
  s.add_prompt_token(0);
  s.add_output_token(1);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f};
  s.apply(l.data(), 4, p, 1);
  // Token 0 (prompt): 2 / 2; token 1 (output): -1 * 2; tokens 2 and 3 unseen.
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
}

TEST(LogitsProcessing, PresenceAndFrequencyCountOutputTokensOnly) {
  SequenceLogitState s;
  s.add_prompt_token(0);
  s.add_prompt_token(0);
  for (int i = 0; i < 3; ++i) s.add_output_token(1);
  s.add_output_token(2);
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  s.apply(l.data(), 4, p, 4);
  // 1 - 0.5 - 0.25 x count: token 1 seen 3 times -> -0.25, token 2 once -> 0.25; the prompt's token 0 untouched.
  EXPECT_EQ(l, (std::vector<float>{1.0f, -0.25f, 0.25f, 1.0f}));
  // Negative penalties reward repetition.
  p.presence_penalty = -2.0f;
  p.frequency_penalty = -1.0f;
  std::vector<float> r = {0.0f, 0.0f, 0.0f, 0.0f};
  s.apply(r.data(), 4, p, 4);
  EXPECT_EQ(r, (std::vector<float>{0.0f, 5.0f, 3.0f, 0.0f}));
}

TEST(LogitsProcessing, AllControlsApplyInTheDocumentedOrder) {
  // bias, then mask, then repetition, then presence/frequency: 3 + 1 = 4, / 2 = 2, - (1 + 1) = 0.
  SequenceLogitState s;
  const std::vector<TokenBias> bias = {{0, 1.0f}};
  s.set_biases(bias.data(), 1);
  s.add_output_token(0);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  p.frequency_penalty = 1.0f;
  std::vector<float> l = {3.0f, 0.5f};
  s.apply(l.data(), 2, p, 1);
  EXPECT_EQ(l, (std::vector<float>{0.0f, 0.5f}));
}

// A micro-batch with one chunk of `tokens` for slot 0 at start_pos.
MicroBatch chunk_of(std::vector<int32_t> tokens, int32_t start_pos, OutputKind kind, int32_t step, SamplingParams p) {
  MicroBatch mb;
  Chunk c;
  c.slot = 0;
  c.start_pos = start_pos;
  c.n_tokens = static_cast<int32_t>(tokens.size());
  c.output = kind;
  c.step = step;
  c.sampling = p;
  mb.chunks.push_back(c);
  mb.tokens = tokens;
  mb.targets.assign(tokens.size(), -1);
  return mb;
}

TEST(SlotLogitStates, CountsThePromptAndTheOutputAsDecodeStepsFeedThem) {
  SamplingParams p;
  p.presence_penalty = 1.0f;  // output tokens only: shows which tokens counted as output
  SlotLogitStates states;
  // Prompt 5 6 7 in two chunks (the first needs no output), then the decode steps feed outputs 7 and 8.
  states.observe(chunk_of({5, 6}, 0, OutputKind::None, 0, p));
  states.observe(chunk_of({7}, 2, OutputKind::Sample, 0, p));
  std::vector<float> l(10, 0.0f);
  states.slot(0).apply(l.data(), 10, p, 0);
  EXPECT_EQ(l, std::vector<float>(10, 0.0f)) << "a prompt alone has no output tokens";
  states.observe(chunk_of({7}, 3, OutputKind::Sample, 1, p));
  states.observe(chunk_of({8}, 4, OutputKind::Sample, 2, p));
  states.slot(0).apply(l.data(), 10, p, 2);
  std::vector<float> expected(10, 0.0f);
  expected[7] = -1.0f;
  expected[8] = -1.0f;
  EXPECT_EQ(l, expected);
  // With repetition: prompt tokens 5 and 6 count too (positive logits divided by 2).
  p.presence_penalty = 0.0f;
  p.repetition_penalty = 2.0f;
  std::vector<float> r(10, 4.0f);
  states.slot(0).apply(r.data(), 10, p, 2);
  std::vector<float> expected_r(10, 4.0f);
  for (int id : {5, 6, 7, 8}) expected_r[static_cast<size_t>(id)] = 2.0f;
  EXPECT_EQ(r, expected_r);
}

TEST(SlotLogitStates, AFirstChunkResetsTheSlotAndInstallsItsSettings) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  SlotLogitStates states;
  states.observe(chunk_of({1, 2}, 0, OutputKind::Sample, 0, p));
  states.observe(chunk_of({3}, 2, OutputKind::Sample, 1, p));
  // The slot is reused by a new sequence with a logit bias.
  MicroBatch next = chunk_of({4}, 0, OutputKind::Sample, 0, p);
  next.biases = {{2, 0.5f}};
  next.chunks[0].first_bias = 0;
  next.chunks[0].n_biases = 1;
  states.observe(next);
  std::vector<float> l(5, 0.0f);
  states.slot(0).apply(l.data(), 5, p, 0);
  EXPECT_EQ(l, (std::vector<float>{0.0f, 0.0f, 0.5f, 0.0f, 0.0f})) << "the old output token 3 is forgotten";
}

TEST(Sampler, LogprobIsOfTheProcessedRow) {
  // Two equal logits, token 1 biased by ln 3: p(1) = 3/4 in the processed distribution.
  SequenceLogitState s;
  const std::vector<TokenBias> bias = {{1, static_cast<float>(std::log(3.0))}};
  s.set_biases(bias.data(), 1);
  std::vector<float> l = {0.0f, 0.0f};
  SamplingParams p;  // greedy
  s.apply(l.data(), 2, p, 0);
  Sampler sampler(2);
  const TokenChoice t = sampler.choose(l.data(), p, 1, 0);
  EXPECT_EQ(t.token, 1);
  constexpr double kExpTolerance = 1e-6;  // the vector exp is within 2 ulp of float; the log in double
  EXPECT_NEAR(t.logprob, std::log(0.75), kExpTolerance);
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  // The masked token has the largest raw logit; every draw at a high temperature must avoid it.
  std::vector<float> l = {-kInf, 0.0f, 0.0f, 0.0f};
  SamplingParams p;
  p.temperature = 5.0f;
  Sampler sampler(4);
  for (int32_t step = 0; step < 2000; ++step) {
    const TokenChoice t = sampler.choose(l.data(), p, 9, step);
    ASSERT_NE(t.token, 0) << "step " << step;
    ASSERT_TRUE(std::isfinite(t.logprob));
  }
}

TEST(WireSettings, FirstChunkSettingsSurviveTheWire) {
  MicroBatch mb;
  mb.id = 3;
  Chunk c;
  c.n_tokens = 1;
  c.output = OutputKind::Sample;
  c.first_bias = 0;
  c.n_biases = 2;
  c.first_mask = 0;
  c.n_mask = 3;
  c.sampling.repetition_penalty = 1.25f;
  c.sampling.min_tokens = 4;
  mb.chunks.push_back(c);
  mb.tokens = {17};
  mb.targets = {-1};
  mb.biases = {{5, -100.0f}, {9, 2.5f}};
  mb.min_mask = {2, 13, 1};
  const std::vector<float> x = {0.5f, -1.0f};
  std::vector<uint8_t> msg;
  glacier::pipeline::encode_forward(mb, x.data(), 2, glacier::pipeline::WireCodec::F32, msg);
  ASSERT_LE(msg.size(), glacier::pipeline::max_forward_bytes(1, 2));
  MicroBatch back;
  std::vector<float> y(2);
  ASSERT_EQ(glacier::pipeline::decode_forward(msg.data(), msg.size(), 2, back, y.data()),
            glacier::pipeline::MessageKind::MicroBatch);
  ASSERT_EQ(back.biases.size(), 2u);
  EXPECT_EQ(back.biases[1].token, 9);
  EXPECT_EQ(back.biases[1].bias, 2.5f);
  EXPECT_EQ(back.min_mask, mb.min_mask);
  EXPECT_EQ(back.chunks[0].n_mask, 3);
  EXPECT_EQ(back.chunks[0].sampling.repetition_penalty, 1.25f);
  EXPECT_EQ(back.chunks[0].sampling.min_tokens, 4);
  EXPECT_EQ(y, x);
}

}  // namespace
