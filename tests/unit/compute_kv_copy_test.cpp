// Slot copies of the KV cache (n samples sharing one prefill): KvCache::copy_prefix copies exactly the
// positions asked for; a stage that copies a prompt's KV into another slot decodes there bit for bit as
// where the prompt was computed; and the scheduler's n samples equal samples that each prefill the prompt.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "common/stage_harness.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "compute/kv_cache.h"
#include "compute/sampler.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"
#include "pipeline/local_ring.h"
#include "pipeline/scheduler.h"

namespace {

using namespace glacier;

// Element i of position pos in a slot's tiles (keys or values).
float tile_at(const compute::KvCache& kv, const float* tiles, int32_t pos, int32_t i) {
  const float* tile = tiles + static_cast<size_t>(pos / kernels::kKeyTile) * kv.tile_stride();
  return tile[static_cast<size_t>(i) * kernels::kKeyTile + pos % kernels::kKeyTile];
}
float key_at(const compute::KvCache& kv, int32_t layer, int32_t slot, int32_t pos, int32_t i) {
  return tile_at(kv, kv.key_tiles(layer, slot), pos, i);
}
float value_at(const compute::KvCache& kv, int32_t layer, int32_t slot, int32_t pos, int32_t i) {
  return tile_at(kv, kv.value_tiles(layer, slot), pos, i);
}

TEST(KvCopy, CopiesExactlyThePrefixOfEveryLayer) {
  constexpr int32_t kLayers = 2, kSlots = 3, kCtx = 64, kHeadsKv = 2, kHeadDim = 4, kDim = kHeadsKv * kHeadDim;
  constexpr int32_t kCopied = 21;  // a full key tile and part of the next
  compute::KvCache kv(kLayers, kSlots, kCtx, kHeadsKv, kHeadDim);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Slot 0 holds a prompt of 40 positions, slot 1 older values at every position.
  std::vector<float> row(kDim);
  for (int32_t layer = 0; layer < kLayers; ++layer)
    for (int32_t slot = 0; slot < 2; ++slot)
      for (int32_t pos = 0; pos < (slot == 0 ? 40 : kCtx); ++pos) {
        for (float& x : row) x = u(rng);
        kv.store_key(layer, slot, pos, row.data());
        for (float& x : row) x = u(rng);
        kv.store_value(layer, slot, pos, row.data());
      }
  std::vector<float> old_keys, old_values;
  for (int32_t layer = 0; layer < kLayers; ++layer)
    for (int32_t pos = kCopied; pos < kCtx; ++pos)
      for (int32_t i = 0; i < kDim; ++i) {
        old_keys.push_back(key_at(kv, layer, 1, pos, i));
        old_values.push_back(value_at(kv, layer, 1, pos, i));
      }

  kv.copy_prefix(0, 1, kCopied);

  size_t k = 0;
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    for (int32_t pos = 0; pos < kCopied; ++pos)
      for (int32_t i = 0; i < kDim; ++i) {
        ASSERT_EQ(key_at(kv, layer, 1, pos, i), key_at(kv, layer, 0, pos, i)) << layer << " " << pos << " " << i;
        ASSERT_EQ(value_at(kv, layer, 1, pos, i), value_at(kv, layer, 0, pos, i)) << layer << " " << pos << " " << i;
      }
    for (int32_t pos = kCopied; pos < kCtx; ++pos)  // the destination's later positions are its own
      for (int32_t i = 0; i < kDim; ++i, ++k) {
        ASSERT_EQ(key_at(kv, layer, 1, pos, i), old_keys[k]) << layer << " " << pos << " " << i;
        ASSERT_EQ(value_at(kv, layer, 1, pos, i), old_values[k]) << layer << " " << pos << " " << i;
      }
  }
}

std::string tiny_model() {
  model::SyntheticModelSpec spec = model::synthetic_preset("tiny");
  spec.seed = 23;
  return glacier::testing::synthetic_model_once(spec, "kv-copy");
}

std::vector<int32_t> prompt_tokens(int32_t n, int32_t n_vocab) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(1 + (i * 37 + 11) % (n_vocab - 1));
  return t;
}

// A latent-attention cache (deepseek2) keeps one row per position and no key tiles: a copy moves the rows
// only (prefix sharing and n samples copy slots of such models too).
TEST(KvCopy, CopiesTheLatentRowsOfAnMlaCache) {
  model::ModelConfig cfg;
  cfg.spec.mla = true;
  cfg.kv_lora_rank = 8;
  cfg.n_rot = 4;
  constexpr int32_t kLayers = 2, kSlots = 3, kCtx = 64, kCopied = 21;
  compute::KvCache kv(cfg, kLayers, kSlots, kCtx);
  const int32_t width = cfg.kv_cache_row_floats();
  for (int32_t layer = 0; layer < kLayers; ++layer)
    for (int32_t slot = 0; slot < 2; ++slot)
      for (int32_t pos = 0; pos < kCtx; ++pos)
        for (int32_t i = 0; i < width; ++i) kv.latent_row(layer, slot, pos)[i] = static_cast<float>(1000 * slot + 10 * pos + i + layer);
  kv.copy_prefix(0, 1, kCopied);
  for (int32_t layer = 0; layer < kLayers; ++layer)
    for (int32_t pos = 0; pos < kCtx; ++pos)
      for (int32_t i = 0; i < width; ++i)
        ASSERT_EQ(kv.latent_row(layer, 1, pos)[i], static_cast<float>((pos < kCopied ? 0 : 1000) + 10 * pos + i + layer))
            << layer << " " << pos << " " << i;
}

TEST(KvCopy, DecodingInACopiedSlotEqualsDecodingWhereThePromptWasComputed) {
  glacier::testing::StageHarness h(tiny_model(), {{0, 1}, {1, 2}}, 64, 4, 128);  // two stages: both copy
  const std::vector<int32_t> prompt = prompt_tokens(37, h.cfg.n_vocab);
  const int32_t next = 5;
  const auto V = static_cast<size_t>(h.cfg.n_vocab);
  h.logits(glacier::testing::prompts_batch({prompt}));  // slot 0

  compute::MicroBatch copy;  // a micro-batch of a copy alone
  copy.copies.push_back({0, 1, static_cast<int32_t>(prompt.size())});
  h.logits(copy);

  compute::MicroBatch decode;  // the next token in slot 0 and in slot 1
  for (int32_t slot : {0, 1}) {
    compute::Chunk c;
    c.seq = c.slot = slot;
    c.start_pos = static_cast<int32_t>(prompt.size());
    c.n_tokens = 1;
    c.token_offset = decode.n_tokens();
    decode.chunks.push_back(c);
    decode.tokens.push_back(next);
    decode.targets.push_back(-1);
  }
  const std::vector<float> decoded = h.logits(decode);

  // The prompt and the token computed afresh in slot 2.
  std::vector<int32_t> whole = prompt;
  whole.push_back(next);
  compute::MicroBatch fresh = glacier::testing::prompts_batch({{}, {}, whole});
  fresh.chunks.erase(fresh.chunks.begin(), fresh.chunks.begin() + 2);
  const std::vector<float> direct = h.logits(fresh);
  const float* direct_last = direct.data() + (whole.size() - 1) * V;

  EXPECT_EQ(std::memcmp(decoded.data(), direct_last, V * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(decoded.data() + V, direct_last, V * sizeof(float)), 0);
}

// Runs the requests over a scheduler on a single-stage local ring; outcomes by (seq, sample).
std::map<std::pair<int32_t, int32_t>, pipeline::SequenceOutcome> run(glacier::testing::StageHarness& h,
                                                                      const std::vector<pipeline::SequenceRequest>& reqs,
                                                                      bool share, int32_t ubatch) {
  pipeline::LocalRing ring(*h.stages.front(), 2);
  pipeline::SchedulerOptions opt;
  opt.n_slots = h.n_slots;
  opt.n_ctx = h.n_ctx;
  opt.ubatch = ubatch;
  opt.max_in_flight = 2;
  opt.share_prompt = share;
  std::map<std::pair<int32_t, int32_t>, pipeline::SequenceOutcome> out;
  pipeline::Scheduler sched(opt, ring, nullptr, [&](pipeline::SequenceOutcome&& o) {
    EXPECT_EQ(o.finish, pipeline::FinishReason::Length) << o.error;
    out[{o.seq, o.sample}] = std::move(o);
  });
  for (const auto& r : reqs) sched.add(r);
  sched.run();
  return out;
}

pipeline::SequenceRequest sampled(int32_t seq, const std::vector<int32_t>& prompt, int32_t n) {
  pipeline::SequenceRequest r;
  r.seq = seq;
  r.tokens = prompt;
  r.max_new_tokens = 12;
  r.n_samples = n;
  r.prompt_key = 1000 + static_cast<uint64_t>(seq);
  r.sampling.temperature = 1.5f;
  r.sampling.seed = 9;
  r.sampling.repetition_penalty = 1.3f;  // the copied logit state counts the prompt's tokens
  r.sampling.frequency_penalty = 0.5f;
  r.logit_bias = {{3, 2.0f}};
  return r;
}

bool same(const pipeline::SequenceOutcome& a, const pipeline::SequenceOutcome& b) {
  return a.generated == b.generated && a.logprobs.size() == b.logprobs.size() &&
         std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)) == 0;
}

TEST(KvCopy, SharedPrefillSamplesEqualSamplesThatEachPrefill) {
  glacier::testing::StageHarness h(tiny_model(), {}, 64, 12, 128);
  const std::vector<pipeline::SequenceRequest> reqs = {sampled(0, prompt_tokens(30, h.cfg.n_vocab), 5),
                                                       sampled(1, prompt_tokens(9, h.cfg.n_vocab), 4)};
  const auto shared = run(h, reqs, true, 64);
  const auto each = run(h, reqs, false, 7);
  ASSERT_EQ(shared.size(), 9u);
  ASSERT_EQ(each.size(), 9u);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& [key, o] : shared) {
    EXPECT_TRUE(same(o, each.at(key))) << "seq " << key.first << " sample " << key.second;
    if (key.first == 0) distinct.insert(o.generated);
  }
  EXPECT_GT(distinct.size(), 1u);  // five streams at temperature 1.5
  // Sample 0 is the prompt's n = 1 answer.
  const auto single = run(h, {sampled(0, prompt_tokens(30, h.cfg.n_vocab), 1)}, true, 64);
  EXPECT_TRUE(same(single.at({0, 0}), shared.at({0, 0})));
}

TEST(KvCopy, SampleZeroKeepsThePromptKey) {
  EXPECT_EQ(compute::sample_stream_key(1234, 0), 1234u);
  EXPECT_NE(compute::sample_stream_key(1234, 1), compute::sample_stream_key(1234, 2));
  EXPECT_NE(compute::sample_stream_key(1234, 1), 1234u);
}

}  // namespace
