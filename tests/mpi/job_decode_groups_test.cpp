// --decode-groups auto (the default) against explicit counts on a 4-stage pipeline with an injected hop:
// tokens and log-probs bitwise the same whatever the groups (greedy and sampled), and the choice with
// its measured inputs recorded in the results file.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::run_glacier;

const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";
constexpr int kStages = 4;
constexpr int kSlots = 16;           // 27 prompts: two waves, and groups of 2 to 4 rows
constexpr double kInjectedHopMs = 2.0;

using GroupedRun = glacier::testing::DecodeGroupsJob;

GroupedRun run_job(const std::string& model, const std::string& name, const std::string& extra) {
  const std::string dir = glacier::testing::scratch_dir("decode-groups");
  const std::string jsonl = dir + "/" + name + ".jsonl", h5 = dir + "/" + name + ".h5";
  const auto job = run_glacier(kStages, "--model " + model + " --prompts " + kPrompts + " --jsonl " + jsonl + " --out " +
                                            h5 + " --max-tokens 24 --threads 1 --bind none --slots " +
                                            std::to_string(kSlots) + " --inject-latency-ms " +
                                            std::to_string(kInjectedHopMs) + " " + extra);
  return glacier::testing::read_decode_groups_job(job, jsonl, h5, 27);
}

void expect_auto_recorded(const GroupedRun& r) {
  const nlohmann::json& d = r.decode_groups;
  ASSERT_EQ(d.value("rule", ""), "auto") << d.dump();
  const int groups = d.at("groups").get<int>();
  std::printf("auto chose %d decode groups: %s\n", groups, d.dump().c_str());
  EXPECT_GE(groups, kStages) << d.dump();
  EXPECT_LE(groups, 2 * kStages) << "auto keeps to the micro-batches in flight the memory check reserves: " << d.dump();
  EXPECT_EQ(d.at("max_groups").get<int>(), 2 * kStages) << d.dump();
  EXPECT_EQ(d.at("slots").get<int>(), kSlots) << d.dump();
  // Every send is held the injected delay: a hop measured around the ring cannot be shorter.
  EXPECT_GE(d.at("hop_ms").get<double>(), kInjectedHopMs) << d.dump();
  ASSERT_EQ(d.at("stage_step").size(), static_cast<size_t>(kStages)) << d.dump();
  for (const auto& stage : d.at("stage_step")) {
    // 1, 2 and 4 rows: a group's rows at one group a stage is 16 / 4.
    EXPECT_EQ(stage.at("rows").get<std::vector<int>>(), (std::vector<int>{1, 2, 4})) << d.dump();
    for (double ms : stage.at("ms").get<std::vector<double>>()) EXPECT_GT(ms, 0.0) << d.dump();
    // The rule's costs are a line through them, never falling with the rows.
    const auto line = stage.at("line_ms").get<std::vector<double>>();
    ASSERT_EQ(line.size(), 3u) << d.dump();
    EXPECT_LE(line[0], line[1]) << d.dump();
    EXPECT_LE(line[1], line[2]) << d.dump();
  }
  EXPECT_GT(d.at("predicted_ms_per_token").get<double>(), 0.0) << d.dump();
  EXPECT_LE(d.at("predicted_ms_per_token").get<double>(), d.at("predicted_ms_per_token_one_group_a_stage").get<double>())
      << d.dump();
  EXPECT_NE(r.log.find(std::to_string(groups) + " decode groups (auto, of 4 to 8: 16 slots, hop "), std::string::npos)
      << r.log;
}

void expect_same_outputs(const GroupedRun& a, const GroupedRun& b, const std::string& what) {
  EXPECT_EQ(a.outputs.tokens, b.outputs.tokens) << what;
  EXPECT_EQ(a.outputs.logprob_bits, b.outputs.logprob_bits) << what;
}

TEST(DecodeGroups, AutoGivesTheResultsOfEveryExplicitCount) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const GroupedRun automatic = run_job(model, "auto", "");
  expect_auto_recorded(automatic);
  // One group a stage (0 and 4 alike), between, two a stage, and one sequence a group.
  for (const char* groups : {"0", "6", "8", "16"}) {
    const GroupedRun fixed = run_job(model, std::string("g") + groups, std::string("--decode-groups ") + groups);
    expect_same_outputs(automatic, fixed, std::string("--decode-groups ") + groups);
    EXPECT_EQ(fixed.decode_groups.value("rule", ""), std::string("--decode-groups ") + groups) << fixed.decode_groups.dump();
    EXPECT_FALSE(fixed.decode_groups.contains("hop_ms")) << "an explicit count measures nothing";
  }
}

TEST(DecodeGroups, SampledTokensDoNotDependOnTheGroups) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string sampling = "--temperature 0.8 --seed 17 --top-p 0.9";
  const GroupedRun automatic = run_job(model, "auto_sampled", "--decode-groups auto " + sampling);
  expect_auto_recorded(automatic);
  const GroupedRun four = run_job(model, "g4_sampled", "--decode-groups 4 " + sampling);
  const GroupedRun eight = run_job(model, "g8_sampled", "--decode-groups 8 " + sampling);
  expect_same_outputs(automatic, four, "sampled, 4 groups");
  expect_same_outputs(automatic, eight, "sampled, 8 groups");
}

}  // namespace
