// --speculate draft:PATH in whole jobs: a draft model with the target's vocabulary (stories260K's own
// Q8_0 and Q4_0 files, and a synthetic pair) gives the same JSONL bytes as --speculate off at 1 and 3
// ranks, with its drafts mostly accepted; a draft with another vocabulary, or none at PATH, stops every
// rank with a message naming the file, and an output may not overwrite the draft model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_trace.h"

namespace {

using nlohmann::json;

constexpr int kExitInputError = 2;   // app/job.h: bad model, prompts or options

// Greedy prompts the small stories model continues fluently (so a same-family draft agrees often), a
// sampled line (verified by the rejection rule), a penalized one (decoded without drafts), and n = 2.
std::vector<json> lines() {
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Tom went to the park",
                                            "The little dog was sad because", "One day, a girl named Sue"};
  std::vector<json> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string id = "g";  // built with += (GCC 12 warns falsely on "g" + std::string)
    id += std::to_string(i);
    out.push_back({{"id", id}, {"prompt", prompts[i]}, {"max_tokens", 40 + 3 * static_cast<int>(i)}});
  }
  out.push_back({{"id", "two"}, {"prompt", prompts[0]}, {"max_tokens", 17}, {"n", 2}});
  out.push_back({{"id", "sampled"}, {"prompt", prompts[1]}, {"max_tokens", 12}, {"temperature", 0.8}, {"seed", 5}});
  out.push_back({{"id", "penalized"}, {"prompt", prompts[2]}, {"max_tokens", 12}, {"repetition_penalty", 1.3}});
  return out;
}

glacier::testing::LinesJob run(const std::string& model, const std::string& name, int np, const std::string& extra) {
  return glacier::testing::run_lines_job(model, "speculate-draft-" + name, np, lines(), extra);
}

class JobSpeculateDraft : public ::testing::TestWithParam<int> {};

TEST_P(JobSpeculateDraft, StoriesDraftsOfItsOwnFamilyGiveTheSameBytes) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(draft_q8, "models/stories260K-q8_0.gguf");
  GLACIER_REQUIRE_SHARED(draft_q4, "models/stories260K-q4_0.gguf");
  const int np = GetParam();
  const std::string tag = "np" + std::to_string(np);
  // 3 ranks: micro-batches of 9 tokens, so the draft model too takes a prompt in several chunks.
  const std::string common = (np == 1 ? "--slots 4" : "--slots 8 --ubatch 9") + std::string(" --top-logprobs 2");
  const auto off = run(model, tag + "-off", np, common);
  for (const std::string& draft : {draft_q8, draft_q4}) {
    const auto spec = run(model, tag + "-" + draft.substr(draft.size() - 9, 4), np,
                          common + " --speculate draft:" + draft + " --draft-max 4");
    glacier::testing::expect_same_jsonl(spec.jsonl, off.jsonl, "--speculate draft:" + draft, "--speculate off");
    const glacier::io::TraceCounters c = glacier::io::read_trace_counters(spec.dir + "/r.h5");
    EXPECT_GT(c.speculation_verifications, 0) << draft;
    EXPECT_LE(c.speculation_drafted, 4 * c.speculation_verifications);
    // The quantized files of the same weights pick the same greedy token nearly always.
    EXPECT_GT(c.speculation_accepted, c.speculation_drafted / 2) << draft << ": " << c.speculation_accepted << " of "
                                                                 << c.speculation_drafted;
    EXPECT_NE(spec.log.find("draft model " + draft), std::string::npos) << spec.log;
  }
}

TEST_P(JobSpeculateDraft, SyntheticPairSharingAVocabularyGivesTheSameBytes) {
  const int np = GetParam();
  const std::string dir = glacier::testing::scratch_dir("speculate-draft-synthetic-np" + std::to_string(np));
  const std::string target = dir + "/target.gguf", draft = dir + "/draft.gguf";
  // The built-in vocabulary depends on --n-vocab alone: different layers and seeds, the same tokens.
  for (const auto& [path, shape] : {std::pair{target, "--n-layer 3 --n-ff 256 --seed 11"},
                                    std::pair{draft, "--n-layer 1 --n-ff 128 --seed 12"}}) {
    const std::string mk = std::string(GLACIER_BUILD_DIR) + "/glacier_mkmodel --preset tiny --n-embd 128 --n-head 4 " +
                           "--n-head-kv 2 --n-vocab 1024 --type q8_0 " + shape + " --out " + path + " > /dev/null";
    ASSERT_EQ(std::system(mk.c_str()), 0) << mk;
  }
  const auto off = run(target, "synthetic-off-np" + std::to_string(np), np, "--slots 4");
  const auto spec = run(target, "synthetic-draft-np" + std::to_string(np), np, "--slots 4 --speculate draft:" + draft);
  glacier::testing::expect_same_jsonl(spec.jsonl, off.jsonl, "--speculate draft:" + draft, "--speculate off");
  // Random weights make acceptance a matter of chance: what holds is that drafts were made and verified.
  EXPECT_GT(glacier::io::read_trace_counters(spec.dir + "/r.h5").speculation_drafted, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobSpeculateDraft, ::testing::Values(1, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(JobSpeculateDraftRefused, AnotherVocabularyOrNoFileStopsEveryRank) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("speculate-draft-refused");
  const std::string other = dir + "/other.gguf";
  const std::string mk = std::string(GLACIER_BUILD_DIR) + "/glacier_mkmodel --preset tiny --out " + other + " > /dev/null";
  ASSERT_EQ(std::system(mk.c_str()), 0) << mk;
  const std::string prompts = dir + "/p.txt";
  ASSERT_EQ(std::system(("echo 'Once upon a time' > " + prompts).c_str()), 0);
  const std::string base = "--model " + model + " --prompts " + prompts + " --jsonl " + dir + "/r.jsonl --threads 1 ";
  const auto wrong = glacier::testing::run_glacier(2, base + "--speculate draft:" + other);
  EXPECT_EQ(wrong.exit_code, kExitInputError) << wrong.output;
  EXPECT_NE(wrong.output.find("the draft model " + other + " must share the vocabulary of " + model),
            std::string::npos) << wrong.output;
  const auto missing = glacier::testing::run_glacier(2, base + "--speculate draft:" + dir + "/absent.gguf");
  EXPECT_EQ(missing.exit_code, kExitInputError) << missing.output;
  EXPECT_NE(missing.output.find(dir + "/absent.gguf"), std::string::npos) << missing.output;
  const auto empty = glacier::testing::run_glacier(1, base + "--speculate draft:");
  EXPECT_EQ(empty.exit_code, kExitInputError) << empty.output;
  EXPECT_NE(empty.output.find("--speculate"), std::string::npos) << empty.output;
  const std::string overwrite = "--model " + model + " --prompts " + prompts + " --jsonl " + other +
                                " --speculate draft:" + other;
  const auto clobber = glacier::testing::run_glacier(1, overwrite);
  EXPECT_EQ(clobber.exit_code, kExitInputError) << clobber.output;
  EXPECT_NE(clobber.output.find("--speculate draft:"), std::string::npos) << clobber.output;
}

}  // namespace
