// --prefix-sharing in whole jobs: prompts built on shared preambles give the same JSONL bytes (tokens,
// log-probs, every sample) with sharing on and off, at 1 and 3 ranks and with replicas, on stories260K
// and a synthetic model, with n = 8 samples, logit_bias and penalties, in score mode, and with more
// distinct preambles than KV slots (rows evicted); the tokens taken from the cache are reported.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_trace.h"

namespace {

using nlohmann::json;

const std::vector<std::string> kPreambles = {
    "Once upon a time there was a little girl named Lily. She liked to play outside with her dog.",
    "Tom had a big red ball. He liked to kick it in the park every day with his friends.",
    "The sun was hot and the birds were singing in the tall green trees near the river.",
    "Sara and Ben went to the zoo. They saw a lion, a monkey and a very big elephant.",
    "A small bird lived in a nest. Every morning it sang a happy song for the farmer.",
};
const std::vector<std::string> kQuestions = {" One day", " Then she said", " He was happy", " They went home"};

// Prompts cycling through the preambles, each followed by a question: sampled, greedy, with logit_bias
// (its settings travel with the first chunk, which now starts past position 0) and penalized.
std::vector<json> generate_lines(int n_lines, int n_samples) {
  std::vector<json> lines;
  for (int i = 0; i < n_lines; ++i) {
    json l = {{"id", "p" + std::to_string(i)},
              {"prompt", kPreambles[static_cast<size_t>(i / 2) % kPreambles.size()] + kQuestions[static_cast<size_t>(i) % kQuestions.size()]},
              {"max_tokens", 10},
              {"temperature", i % 3 == 0 ? 0.0 : 0.9},
              {"seed", 7}};
    if (i % 4 == 1) l["logit_bias"] = {{"13", -3.0}};
    if (i % 5 == 2) l["repetition_penalty"] = 1.2;
    if (i % 6 == 3 && n_samples > 1) l["n"] = n_samples;
    lines.push_back(l);
  }
  return lines;
}

using Job = glacier::testing::LinesJob;

Job run(const std::string& model, const std::string& name, int np, const std::vector<json>& lines,
        const std::string& extra) {
  return glacier::testing::run_lines_job(model, "prefix-" + name, np, lines, extra);
}

using glacier::testing::prefix_cache_tokens;

struct OnAndOff {
  Job on, off;
};

// `lines` with --prefix-sharing off and then with it on (`flags` for both, `on_flags` added to the second;
// "" leaves the default, on): the same bytes, and the job with sharing took prompt tokens from the cache.
OnAndOff expect_same_bytes_with_sharing_on_and_off(const std::string& model, const std::string& tag, int np,
                                                   const std::vector<json>& lines, const std::string& flags,
                                                   const std::string& on_flags = "") {
  Job off = run(model, tag + "-off", np, lines, flags + " --prefix-sharing off");
  Job on = run(model, tag + "-on", np, lines, on_flags.empty() ? flags : flags + " " + on_flags);
  glacier::testing::expect_same_jsonl(on.jsonl, off.jsonl, "sharing on", "sharing off");
  EXPECT_GT(prefix_cache_tokens(on.log), 0) << on.log;
  return {std::move(on), std::move(off)};
}

// The synthetic model of these tests: a small Q8_0 llama (built once per test that needs it).
std::string synthetic_model(const std::string& dir) {
  const std::string model = dir + "/m.gguf";
  const std::string mk = std::string(GLACIER_BUILD_DIR) +
                         "/glacier_mkmodel --preset tiny --n-embd 128 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 256 "
                         "--n-vocab 1024 --type q8_0 --seed 11 --out " + model + " > /dev/null";
  EXPECT_EQ(std::system(mk.c_str()), 0) << mk;
  return model;
}

class JobPrefixSharing : public ::testing::TestWithParam<int> {};

TEST_P(JobPrefixSharing, StoriesGenerateIsBitwiseTheSameWithSharingOnAndOff) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::vector<json> lines = generate_lines(20, 8);
  const std::string tag = "stories-np" + std::to_string(np);
  // 3 ranks: smaller micro-batches, so prefixes and the rest are cut into other chunks.
  const std::string common = np == 1 ? "--slots 10" : "--slots 10 --ubatch 7";
  const OnAndOff jobs = expect_same_bytes_with_sharing_on_and_off(model, tag, np, lines, common);  // on by default
  EXPECT_EQ(prefix_cache_tokens(jobs.off.log), 0) << jobs.off.log;
}

TEST_P(JobPrefixSharing, SyntheticGenerateIsBitwiseTheSameWithSharingOnAndOff) {
  const int np = GetParam();
  const std::string model = synthetic_model(glacier::testing::scratch_dir("prefix-model-np" + std::to_string(np)));
  const std::vector<json> lines = generate_lines(16, 8);
  const std::string tag = "synthetic-np" + std::to_string(np);
  expect_same_bytes_with_sharing_on_and_off(model, tag, np, lines, "--slots 9", "--prefix-sharing on");
}

// Five preambles through two slots: a slot's rows are given up for each new preamble, and a prompt
// still finds its preamble in the slot its predecessor left when that one was not evicted yet.
TEST_P(JobPrefixSharing, MorePreamblesThanSlotsEvictsAndStaysTheSame) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::vector<json> lines = generate_lines(20, 1);
  const std::string tag = "evict-np" + std::to_string(np);
  expect_same_bytes_with_sharing_on_and_off(model, tag, np, lines, "--slots 2");
}

TEST_P(JobPrefixSharing, ScoresAreBitwiseTheSameWithSharingOnAndOff) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  std::vector<json> lines;
  for (int i = 0; i < 12; ++i)
    lines.push_back({{"id", "s" + std::to_string(i)},
                     {"context", kPreambles[static_cast<size_t>(i / 4) % kPreambles.size()]},
                     {"continuation", kQuestions[static_cast<size_t>(i) % kQuestions.size()]}});
  const std::string tag = "score-np" + std::to_string(np);
  expect_same_bytes_with_sharing_on_and_off(model, tag, np, lines, "--mode score --slots 4");
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobPrefixSharing, ::testing::Values(1, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// Three replicas of one stage, each with its own cache: the same results, and /trace's counters add
// up over the replicas to every prompt token, computed or taken from a cache.
TEST(JobPrefixSharingReplicas, EachReplicaSharesItsOwnPrefixesAndTheCountersAddUp) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::vector<json> lines = generate_lines(24, 1);
  const Job off = run(model, "replicas-off", 1, lines, "--slots 3 --prefix-sharing off");
  const Job on = run(model, "replicas-on", 3, lines, "--slots 3 --replicas 3");
  glacier::testing::expect_same_jsonl(on.jsonl, off.jsonl, "sharing on", "sharing off");
  int64_t prompt_tokens = 0;
  for (const json& row : glacier::testing::read_jsonl(on.dir + "/r.jsonl")) prompt_tokens += static_cast<int64_t>(row["prompt_tokens"].size());
  const glacier::io::TraceCounters c = glacier::io::read_trace_counters(on.dir + "/r.h5");
  EXPECT_GT(c.prompt_tokens_reused, 0);
  EXPECT_EQ(c.prompt_tokens_computed + c.prompt_tokens_reused, prompt_tokens);
  const glacier::io::TraceCounters c_off = glacier::io::read_trace_counters(off.dir + "/r.h5");
  EXPECT_EQ(c_off.prompt_tokens_reused, 0);
  EXPECT_EQ(c_off.prompt_tokens_computed, prompt_tokens);
}

}  // namespace
