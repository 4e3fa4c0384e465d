// StageHarness: stages built from load_shard over a layer split, driven directly (logits) or by the
// scheduler over a local ring (generation).
#include "common/stage_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "pipeline/local_ring.h"
#include "pipeline/scheduler.h"
#include "util/error.h"

namespace glacier::testing {

namespace {
constexpr int32_t kHeadRows = 16;  // rows per head() call, within the stage's buffers
}  // namespace

StageHarness::StageHarness(const std::string& path, std::vector<model::LayerRange> split, int32_t ubatch,
                           int32_t slots, int32_t ctx)
    : file(gguf::File::open(path)), cfg(model::read_model_config(*file)), pool(std::make_unique<ThreadPool>(2)),
      n_slots(slots), n_ctx(ctx) {
  if (split.empty()) split.push_back({0, cfg.n_layer});
  for (size_t s = 0; s < split.size(); ++s) {
    const bool first = s == 0, last = s + 1 == split.size();
    stages.push_back(std::make_unique<compute::TransformerStage>(
        cfg, model::load_shard(*file, cfg, split[s], first, last), n_slots, n_ctx, ubatch, *pool));
  }
}

std::vector<float> StageHarness::logits(const compute::MicroBatch& mb) {
  std::vector<float> x(static_cast<size_t>(mb.n_tokens()) * cfg.n_embd);
  stages.front()->embed(mb, x.data());
  for (auto& s : stages) s->run_layers(mb, x.data());
  const size_t V = static_cast<size_t>(cfg.n_vocab);
  std::vector<float> out(static_cast<size_t>(mb.n_tokens()) * V), part(kHeadRows * V);
  for (int32_t r0 = 0; r0 < mb.n_tokens(); r0 += kHeadRows) {
    std::vector<int32_t> rows;
    for (int32_t r = r0; r < std::min(mb.n_tokens(), r0 + kHeadRows); ++r) rows.push_back(r);
    stages.back()->head(x.data(), rows, part.data());
    std::copy(part.begin(), part.begin() + rows.size() * V, out.begin() + r0 * V);
  }
  return out;
}

std::vector<std::vector<int32_t>> StageHarness::greedy(const std::vector<std::vector<int32_t>>& prompts,
                                                       int32_t n_tokens, const std::set<int32_t>& eog) {
  GLACIER_ASSERT(stages.size() == 1, "greedy() runs a single-stage harness");
  pipeline::LocalRing ring(*stages.front(), 2);
  pipeline::SchedulerOptions opt;
  opt.n_slots = n_slots;
  opt.n_ctx = n_ctx;
  opt.ubatch = stages.front()->max_tokens();
  opt.max_in_flight = 2;
  std::vector<std::vector<int32_t>> out(prompts.size());
  pipeline::Scheduler sched(
      opt, ring, [&](const pipeline::SequenceOutcome& o) { return eog.count(o.generated.back()) > 0; },
      [&](pipeline::SequenceOutcome&& o) { out[static_cast<size_t>(o.seq)] = std::move(o.generated); });
  for (size_t i = 0; i < prompts.size(); ++i) {
    pipeline::SequenceRequest r;
    r.seq = static_cast<int32_t>(i);
    r.tokens = prompts[i];
    r.max_new_tokens = n_tokens;
    sched.add(std::move(r));
  }
  sched.run();
  return out;
}

std::vector<int32_t> bos_ramp(int32_t n, int32_t first, int32_t step) {
  std::vector<int32_t> ids = {1};
  for (int32_t i = 0; i < n; ++i) ids.push_back(first + step * i);
  return ids;
}

compute::MicroBatch prompts_batch(const std::vector<std::vector<int32_t>>& prompts) {
  compute::MicroBatch mb;
  for (size_t i = 0; i < prompts.size(); ++i) {
    compute::Chunk c;
    c.seq = c.slot = static_cast<int32_t>(i);
    c.n_tokens = static_cast<int32_t>(prompts[i].size());
    c.token_offset = mb.n_tokens();
    mb.chunks.push_back(c);
    mb.tokens.insert(mb.tokens.end(), prompts[i].begin(), prompts[i].end());
  }
  mb.targets.assign(mb.tokens.size(), -1);
  return mb;
}

void expect_split_equals_one_stage(const std::string& path, const std::vector<model::LayerRange>& split,
                                   const std::vector<std::vector<int32_t>>& prompts) {
  const compute::MicroBatch mb = prompts_batch(prompts);
  StageHarness one(path);
  StageHarness several(path, split);
  const std::vector<float> a = one.logits(mb), b = several.logits(mb);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << path << ": the split's logits differ";
}

}  // namespace glacier::testing
