// --speculate lookup in whole jobs: greedy rows give the same JSONL bytes (tokens, log-probs, top
// alternatives, finish reasons) as --speculate off, at 1 and 3 ranks and --draft-max 1..4, on stories260K
// with repetitive prompts (so drafts are accepted) and on a synthetic model; stops, max_tokens,
// min_tokens, sampled rows (verified by the rejection rule) and penalized rows (which decode without
// drafts) behave as without speculation; sampled jobs are the same bytes on 1 and 3 ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_trace.h"

namespace {

using nlohmann::json;


// Texts that repeat themselves, so the continuation tends to repeat them too.
const std::vector<std::string> kRepetitive = {
    "Once upon a time there was a cat. The cat sat on the mat. The cat sat on the mat. The cat sat on the",
    "Tom said: I like the ball. I like the ball. I like the ball. I like",
    "One two three four. One two three four. One two three four. One two",
    "Lily went to the park. She saw a dog. Lily went to the park. She saw a",
    "The sun is hot. The sun is big. The sun is hot. The sun is",
};

using Job = glacier::testing::LinesJob;

Job run(const std::string& model, const std::string& name, int np, const std::vector<json>& lines,
        const std::string& extra) {
  return glacier::testing::run_lines_job(model, "speculate-" + name, np, lines, extra);
}

// The same bytes, with the first differing line named on failure.
void expect_same_results(const Job& spec, const Job& off, const std::string& what) {
  glacier::testing::expect_same_jsonl(spec.jsonl, off.jsonl, what, "--speculate off");
}

// The job's "N sequences decoded without" figure (-1 when missing).
int64_t plain_sequences(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("(\\d+) sequences decoded without \\(penalized\\)"))) return -1;
  return std::stoll(m[1]);
}

// Greedy lines over the repetitive prompts with different endings, plus one sampled line and one
// penalized line that may not speculate. `stop_id`: a token the outputs contain, ending one line early (after
// min_tokens on another).
std::vector<json> lines_for(int stop_id) {
  std::vector<json> lines;
  for (size_t i = 0; i < kRepetitive.size(); ++i) {
    lines.push_back({{"id", "long" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 48}});
    // An odd max_tokens, so a verify step is cut by the tokens left.
    lines.push_back({{"id", "short" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 5 + 2 * static_cast<int>(i)}});
  }
  lines.push_back({{"id", "stopstr"}, {"prompt", kRepetitive[0]}, {"max_tokens", 40}, {"stop", {"happy.\nThe"}}});
  lines.push_back({{"id", "stopid"}, {"prompt", kRepetitive[1]}, {"max_tokens", 40}, {"stop_token_ids", {stop_id}}});
  lines.push_back({{"id", "minstop"}, {"prompt", kRepetitive[1]}, {"max_tokens", 40}, {"min_tokens", 12}, {"stop_token_ids", {stop_id}}});
  lines.push_back({{"id", "bias"}, {"prompt", kRepetitive[2]}, {"max_tokens", 30}, {"logit_bias", {{std::to_string(stop_id), -2.0}}}});
  lines.push_back({{"id", "two"}, {"prompt", kRepetitive[3]}, {"max_tokens", 20}, {"n", 2}});
  lines.push_back({{"id", "sampled"}, {"prompt", kRepetitive[4]}, {"max_tokens", 20}, {"temperature", 0.8}, {"seed", 3}});
  lines.push_back({{"id", "penalized"}, {"prompt", kRepetitive[0]}, {"max_tokens", 20}, {"repetition_penalty", 1.3}});
  return lines;
}
constexpr int64_t kPlainLines = 1;  // "penalized"

class JobSpeculate : public ::testing::TestWithParam<int> {};

TEST_P(JobSpeculate, StoriesGreedyIsBitwiseTheSameForEveryDraftLength) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::string tag = "stories-np" + std::to_string(np);
  // A token the model writes in the middle of a continuation, for the lines that stop on an id.
  const Job probe = run(model, tag + "-probe", np, {{{"id", "p"}, {"prompt", kRepetitive[1]}, {"max_tokens", 20}}}, "");
  const json probe_row = json::parse(probe.jsonl);
  ASSERT_GE(probe_row["tokens"].size(), 8u);
  const int stop_id = probe_row["tokens"][6].get<int>();
  const std::vector<json> lines = lines_for(stop_id);
  // 3 ranks: a small --ubatch cuts prompts into several chunks, and more slots than lines keep
  // several sequences in each decode micro-batch.
  const std::string common = (np == 1 ? "--slots 4" : "--slots 16 --ubatch 9") + std::string(" --top-logprobs 2");
  const Job off = run(model, tag + "-off", np, lines, common);
  for (int d = 1; d <= 4; ++d) {
    const Job spec = run(model, tag + "-d" + std::to_string(d), np, lines,
                         common + " --speculate lookup --draft-max " + std::to_string(d));
    expect_same_results(spec, off, "--speculate lookup --draft-max " + std::to_string(d));
    const glacier::io::TraceCounters c = glacier::io::read_trace_counters(spec.dir + "/r.h5");
    EXPECT_GT(c.speculation_verifications, 0) << "d=" << d;
    EXPECT_GT(c.speculation_accepted, 0) << "d=" << d << ": the repetitive prompts should have drafts accepted";
    EXPECT_LE(c.speculation_drafted, d * c.speculation_verifications);
    EXPECT_LE(c.speculation_accepted, c.speculation_drafted);
    // A step emits its accepted drafts and the model's own token, less any cut by a stop or max_tokens.
    EXPECT_LE(c.speculation_emitted, c.speculation_verifications + c.speculation_accepted);
    EXPECT_GT(c.speculation_emitted, c.speculation_accepted);
    EXPECT_EQ(plain_sequences(spec.log), kPlainLines) << spec.log;
  }
  const glacier::io::TraceCounters c_off = glacier::io::read_trace_counters(off.dir + "/r.h5");
  EXPECT_EQ(c_off.speculation_verifications, 0);
  EXPECT_EQ(plain_sequences(off.log), -1) << "no speculation summary with --speculate off";
}

TEST_P(JobSpeculate, SyntheticGreedyIsBitwiseTheSame) {
  const int np = GetParam();
  const std::string dir = glacier::testing::scratch_dir("speculate-model-np" + std::to_string(np));
  const std::string model = dir + "/m.gguf";
  const std::string mk = std::string(GLACIER_BUILD_DIR) +
                         "/glacier_mkmodel --preset tiny --n-embd 128 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 256 "
                         "--n-vocab 1024 --type q8_0 --seed 11 --out " + model + " > /dev/null";
  ASSERT_EQ(std::system(mk.c_str()), 0) << mk;
  std::vector<json> lines;
  for (size_t i = 0; i < kRepetitive.size(); ++i)
    lines.push_back({{"id", "s" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 24}});
  const std::string tag = "synthetic-np" + std::to_string(np);
  const Job off = run(model, tag + "-off", np, lines, "--slots 6");
  for (int d : {1, 4}) {
    const Job spec = run(model, tag + "-d" + std::to_string(d), np, lines,
                         "--slots 6 --speculate lookup --draft-max " + std::to_string(d));
    expect_same_results(spec, off, "--speculate lookup --draft-max " + std::to_string(d));
    // Random weights make acceptance a matter of chance; the prompts' repeats make drafts certain.
    EXPECT_GT(glacier::io::read_trace_counters(spec.dir + "/r.h5").speculation_drafted, 0);
  }
}

// A full batch (32 greedy prompts in 32 slots): the policy keeps drafts out of the decode steps while the
// decode groups are full and lets them back in as sequences finish (max_tokens from 6 to 48), and every
// line stays byte-identical. Micro-batches with drafts are "verify" rows on every rank; the driver's
// lookups are "draft" rows.
TEST_P(JobSpeculate, FullBatchDraftsOnlyOnceTheGroupsThinAndStaysBitwiseTheSame) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  constexpr int kPrompts = 32;
  std::vector<json> lines;
  for (int i = 0; i < kPrompts; ++i) {
    std::string id = "b";  // built with += (GCC 12 warns falsely on "b" + std::string)
    id += std::to_string(i);
    lines.push_back({{"id", id}, {"prompt", kRepetitive[static_cast<size_t>(i) % kRepetitive.size()]},
                     {"max_tokens", 6 + 6 * (i % 8)}});
  }
  const std::string tag = "batch-np" + std::to_string(np);
  // One decode group a stage (--decode-groups 0): auto would choose from timings, and with up to 2 groups
  // a stage 32 sequences may fill no group to the policy's 8, which would leave nothing here to check.
  const std::string common = "--slots " + std::to_string(kPrompts) + " --decode-groups 0";
  const Job off = run(model, tag + "-off", np, lines, common);
  const Job spec = run(model, tag + "-lookup", np, lines, common + " --speculate lookup --draft-max 4");
  expect_same_results(spec, off, "--speculate lookup with 32 sequences");
  const glacier::io::TraceCounters c = glacier::io::read_trace_counters(spec.dir + "/r.h5");
  EXPECT_GT(c.speculation_skipped_ring_full, 0) << "32 live sequences fill every decode group";
  EXPECT_GT(c.speculation_verifications, 0) << "drafting resumes once few sequences are left";
  EXPECT_GT(c.speculation_accepted, 0);
  std::map<int32_t, std::set<int64_t>> verify_by_rank;
  int64_t draft_rows = 0;
  for (const glacier::io::TraceRow& row : glacier::io::read_trace(spec.dir + "/r.h5")) {
    if (row.phase == glacier::io::TracePhase::Verify) verify_by_rank[row.rank].insert(row.microbatch);
    if (row.phase == glacier::io::TracePhase::Draft) {
      EXPECT_EQ(row.rank, 0) << "drafting happens on the driver";
      ++draft_rows;
    }
  }
  ASSERT_EQ(verify_by_rank.size(), static_cast<size_t>(np)) << "every stage computes the verify micro-batches";
  for (const auto& [rank, ids] : verify_by_rank) EXPECT_EQ(ids, verify_by_rank[0]) << "rank " << rank;
  EXPECT_LE(static_cast<int64_t>(verify_by_rank[0].size()), c.speculation_verifications);
  EXPECT_GE(draft_rows, static_cast<int64_t>(verify_by_rank[0].size())) << "a draft row for each verify micro-batch";
  for (const glacier::io::TraceRow& row : glacier::io::read_trace(off.dir + "/r.h5"))
    EXPECT_TRUE(row.phase != glacier::io::TracePhase::Verify && row.phase != glacier::io::TracePhase::Draft)
        << "no speculation rows with --speculate off";
}

// Sampled lines (temperature with top-k, top-p, min-p, n = 2, top log-probs) with --speculate lookup: the
// same bytes on 1 and 3 ranks, with different micro-batching and decode groups, and as --speculate off (a
// verify row's token is the draw plain decoding makes at that step, compute::Sampler::verify).
TEST(JobSpeculateSampled, SameBytesOnOneAndThreeRanksAndAsOff) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  std::vector<json> lines;
  for (size_t i = 0; i < kRepetitive.size(); ++i) {
    const int seed = 10 + static_cast<int>(i);
    lines.push_back({{"id", "t" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 40}, {"temperature", 0.9}, {"seed", seed}});
    lines.push_back({{"id", "k" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 33}, {"temperature", 1.2},
                     {"top_k", 20}, {"top_p", 0.9}, {"seed", seed}});
    lines.push_back({{"id", "m" + std::to_string(i)}, {"prompt", kRepetitive[i]}, {"max_tokens", 27}, {"temperature", 0.7},
                     {"min_p", 0.05}, {"seed", seed}});
  }
  lines.push_back({{"id", "two"}, {"prompt", kRepetitive[2]}, {"max_tokens", 30}, {"temperature", 1.0}, {"n", 2}, {"seed", 4}});
  const std::string spec = " --top-logprobs 2 --speculate lookup --draft-max 4";
  const Job one = run(model, "sampled-np1", 1, lines, "--slots 4" + spec);
  const Job three = run(model, "sampled-np3", 3, lines, "--slots 16 --ubatch 9 --decode-groups 2" + spec);
  const Job off = run(model, "sampled-off", 1, lines, "--slots 4 --top-logprobs 2");
  glacier::testing::expect_same_jsonl(three.jsonl, one.jsonl, "sampled lookup on 3 ranks", "sampled lookup on 1 rank");
  glacier::testing::expect_same_jsonl(one.jsonl, off.jsonl, "sampled lookup", "--speculate off");
  for (const Job* j : {&one, &three}) {
    const glacier::io::TraceCounters c = glacier::io::read_trace_counters(j->dir + "/r.h5");
    EXPECT_GT(c.speculation_verifications, 0) << j->dir;
    EXPECT_GT(c.speculation_accepted, 0) << j->dir << ": sampled rows accept drafts on the repetitive prompts";
    // Some drafts rejected (not only cut by max_tokens): the verifications emit fewer than all drafts
    // plus their own token would.
    EXPECT_LT(c.speculation_emitted, c.speculation_verifications + c.speculation_drafted) << j->dir;
    EXPECT_EQ(plain_sequences(j->log), 0) << j->log;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobSpeculate, ::testing::Values(1, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
