// The whole ring in one process: stages as threads over in-process channels, on a synthetic model
// made by the test. Its tokens and log-probs must equal a single-stage run bit for bit, for several
// splits, micro-batch sizes and wire codecs (f32 lossless; int8 only close).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "comm/inprocess_channel.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "pipeline/local_ring.h"
#include "pipeline/pipeline_ring.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_loop.h"
#include "planning/partition.h"

namespace {

using namespace glacier;

constexpr int32_t kCtx = 256;
constexpr int32_t kSlots = 6;

std::string make_model() { return glacier::testing::tiny_q8_0_model_once(5, 11, "inproc"); }

// repetitive: prompts that repeat a few tokens, so prompt lookup has drafts to offer.
std::vector<pipeline::SequenceRequest> requests(int32_t n_vocab, bool repetitive = false) {
  std::vector<pipeline::SequenceRequest> out;
  for (int i = 0; i < 10; ++i) {
    pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens.push_back(1);
    for (int j = 0; j < 3 + 7 * i % 23; ++j)
      r.tokens.push_back(repetitive ? (37 * i + 11 * (j % (2 + i % 3))) % n_vocab : (37 * i + 11 * j) % n_vocab);
    r.max_new_tokens = 12;
    r.prompt_key = 1000 + i;
    r.sampling.temperature = i % 3 == 0 ? 0.9f : 0.0f;
    r.sampling.seed = 5;
    // One penalized sequence among the speculative ones: it decodes without drafts.
    if (repetitive && i == 4) r.sampling.repetition_penalty = 1.2f;
    out.push_back(std::move(r));
  }
  return out;
}

pipeline::SchedulerOptions options(int n_stages, int32_t ubatch) {
  pipeline::SchedulerOptions o;
  o.n_slots = kSlots;
  o.n_ctx = kCtx;
  o.ubatch = ubatch;
  o.max_in_flight = 2 * n_stages;
  o.decode_groups = n_stages;
  return o;
}

// draft_max > 0: speculative decoding by prompt lookup, on repetitive prompts, with a stop rule
// (a token equal to the sequence's first, from its fourth on) so verify steps end mid-draft too.
std::vector<pipeline::SequenceOutcome> run(int n_stages, int32_t ubatch, pipeline::WireCodec codec,
                                           int32_t draft_max = -1, pipeline::SpeculationCounts* counts = nullptr) {
  auto file = gguf::File::open(make_model());
  const model::ModelConfig cfg = model::read_model_config(*file);
  const auto split = planning::partition_by_bytes(model::weight_bytes(*file, cfg), n_stages);
  auto channels = comm::make_inprocess_channels(n_stages);
  std::vector<pipeline::SequenceOutcome> outcomes(10);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_stages; ++r) {
    threads.emplace_back([&, r] {
      ThreadPool pool(1);
      compute::TransformerStage stage(cfg, model::load_shard(*file, cfg, split[r], r == 0, r == n_stages - 1), kSlots,
                                      kCtx, ubatch, pool);
      pipeline::TraceLog trace;
      if (r > 0) {
        pipeline::run_stage_loop(*channels[r], stage, r, n_stages, codec, trace);
        return;
      }
      std::unique_ptr<pipeline::Ring> ring;
      pipeline::PipelineRing* pring = nullptr;
      if (n_stages == 1) {
        ring = std::make_unique<pipeline::LocalRing>(stage, 2);
      } else {
        auto pr = std::make_unique<pipeline::PipelineRing>(*channels[0], stage, n_stages, 2 * n_stages, codec, trace);
        pring = pr.get();
        ring = std::move(pr);
      }
      pipeline::SchedulerOptions opts = options(n_stages, ubatch);
      std::function<bool(const pipeline::SequenceOutcome&)> stop;
      if (draft_max >= 0) {
        opts.draft_max = draft_max;
        stop = [](const pipeline::SequenceOutcome& o) { return o.generated.size() >= 4 && o.generated.back() == o.generated[0]; };
      }
      pipeline::Scheduler sched(opts, *ring, stop, [&](pipeline::SequenceOutcome&& o) { outcomes[o.seq] = std::move(o); });
      for (auto& q : requests(cfg.n_vocab, draft_max >= 0)) sched.add(std::move(q));
      sched.run();
      if (counts) *counts = sched.speculation();
      if (pring) pring->shutdown();
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

TEST(InProcessPipeline, StagesAsThreadsEqualOneStageBitwise) {
  const auto one = run(1, 64, pipeline::WireCodec::F32);
  for (const auto& o : one) ASSERT_EQ(o.generated.size(), 12u);
  for (int stages : {2, 3, 5})
    for (int32_t ubatch : {1, 5, 64}) {
      const auto many = run(stages, ubatch, pipeline::WireCodec::F32);
      for (size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(many[i].generated, one[i].generated) << stages << " stages, ubatch " << ubatch << ", seq " << i;
        ASSERT_EQ(many[i].logprobs.size(), one[i].logprobs.size());
        for (size_t t = 0; t < one[i].logprobs.size(); ++t)
          EXPECT_EQ(std::memcmp(&many[i].logprobs[t], &one[i].logprobs[t], sizeof(float)), 0)
              << stages << " stages, ubatch " << ubatch << ", seq " << i << ", token " << t;
      }
    }
}

// Speculation keeps every token and log-prob, greedy and sampled (every third request) alike: verify
// chunks through 1 and 3 stages, their drafts cut by small micro-batches (ubatch 3) or not, against the
// same requests without drafts (draft_max 0).
TEST(InProcessPipeline, SpeculativeDecodingEqualsPlainDecodingBitwise) {
  const auto plain = run(1, 64, pipeline::WireCodec::F32, 0);
  // The stop rule ends some sequences early and not others, so both endings are compared.
  const auto stopped = std::count_if(plain.begin(), plain.end(), [](const auto& o) { return o.finish == pipeline::FinishReason::Stop; });
  EXPECT_GT(stopped, 0);
  EXPECT_LT(stopped, static_cast<std::ptrdiff_t>(plain.size()));
  for (int stages : {1, 3})
    for (int32_t ubatch : {3, 64})
      for (int32_t draft_max : {1, 4}) {
        pipeline::SpeculationCounts counts;
        const auto spec = run(stages, ubatch, pipeline::WireCodec::F32, draft_max, &counts);
        const std::string where = std::to_string(stages) + " stages, ubatch " + std::to_string(ubatch) +
                                  ", draft_max " + std::to_string(draft_max);
        EXPECT_GT(counts.drafted, 0) << where;
        EXPECT_EQ(counts.plain_sequences, 1) << where << ": the penalized request decodes without drafts";
        for (size_t i = 0; i < plain.size(); ++i) {
          EXPECT_EQ(spec[i].generated, plain[i].generated) << where << ", seq " << i;
          EXPECT_EQ(spec[i].finish, plain[i].finish) << where << ", seq " << i;
          ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size()) << where << ", seq " << i;
          for (size_t t = 0; t < plain[i].logprobs.size(); ++t)
            EXPECT_EQ(std::memcmp(&spec[i].logprobs[t], &plain[i].logprobs[t], sizeof(float)), 0)
                << where << ", seq " << i << ", token " << t;
        }
      }
}

TEST(InProcessPipeline, LossyWiresStayClose) {
  const auto one = run(1, 64, pipeline::WireCodec::F32);
  for (auto codec : {pipeline::WireCodec::F16, pipeline::WireCodec::BF16, pipeline::WireCodec::Int8}) {
    const auto many = run(3, 64, codec);
    // The first token of a greedy sequence depends on one forward pass only: its log-prob moves by the
    // codec's rounding, far less than 0.5 nats (a broken codec gives garbage, several nats off).
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_FALSE(many[i].logprobs.empty());
      EXPECT_NEAR(many[i].logprobs[0], one[i].logprobs[0], 0.5) << pipeline::codec_name(codec) << " seq " << i;
    }
  }
}

}  // namespace
