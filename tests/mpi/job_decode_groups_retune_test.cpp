// --decode-groups auto re-tuned between waves: a job whose live sequences fall from the slots to one
// (prompts with very different max_tokens) re-chooses its groups at the tail, records each change in the
// log and the results file, and gives the tokens and log-probs of explicit counts bit for bit.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::run_glacier;

const std::string kSourcePrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";
constexpr int kStages = 4;
constexpr int kPrompts = 16;  // one wave filling the slots, then a tail of one sequence after another
// A short hop against stories260K's steps: auto's model then predicts ~10% from more than one group a
// stage at 16 slots (well past its 2% bar), while 4 or fewer live sequences allow only one a stage, so
// the tail must re-tune downwards.
constexpr double kInjectedHopMs = 0.5;

// The first kPrompts prompts, the i-th with max_tokens 4 + 6 i: every few steps a sequence finishes.
std::string staggered_prompts(const std::string& dir) {
  std::ifstream in(kSourcePrompts);
  const std::string path = dir + "/staggered.jsonl";
  std::ofstream out(path);
  std::string line;
  for (int i = 0; i < kPrompts && std::getline(in, line); ++i) {
    nlohmann::json row = nlohmann::json::parse(line);
    row["max_tokens"] = 4 + 6 * i;
    out << row.dump() << "\n";
  }
  return path;
}

using JobResult = glacier::testing::DecodeGroupsJob;

JobResult run_job(const std::string& model, const std::string& name, const std::string& extra) {
  const std::string dir = glacier::testing::scratch_dir("decode-groups-retune");
  const std::string jsonl = dir + "/" + name + ".jsonl", h5 = dir + "/" + name + ".h5";
  const auto job = run_glacier(kStages, "--model " + model + " --prompts " + staggered_prompts(dir) + " --jsonl " +
                                            jsonl + " --out " + h5 + " --threads 1 --bind none --slots " +
                                            std::to_string(kPrompts) + " --inject-latency-ms " +
                                            std::to_string(kInjectedHopMs) + " " + extra);
  return glacier::testing::read_decode_groups_job(job, jsonl, h5, static_cast<size_t>(kPrompts));
}

TEST(DecodeGroupsRetune, TheTailReTunesAndKeepsTheResults) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const JobResult automatic = run_job(model, "auto", "");
  const nlohmann::json& d = automatic.decode_groups;
  ASSERT_EQ(d.value("rule", ""), "auto") << d.dump();
  const int start = d.at("groups").get<int>();
  // The start-up choice comes from timings: on a host where the hop weighs less against the steps (or
  // where the timing was disturbed), auto may already take one group a stage and nothing can fall.
  if (start <= kStages)
    GTEST_SKIP() << "auto chose " << start << " groups at start-up on this host (one a stage): the tail has no "
                 << "room to re-tune (see kInjectedHopMs): " << d.dump();
  ASSERT_TRUE(d.contains("retunes")) << d.dump();
  const nlohmann::json& retunes = d.at("retunes");
  ASSERT_GE(retunes.size(), 1u) << d.dump();
  // A chain from the start-up choice: each rule re-choice at a live count at most half or at least double
  // the last, each measured one for a rate above the one it replaced.
  int groups = start, last_live = kPrompts;
  for (const nlohmann::json& r : retunes) {
    const int at = r.at("at_live").get<int>();
    EXPECT_EQ(r.at("from").get<int>(), groups) << d.dump();
    EXPECT_NE(r.at("to").get<int>(), groups) << d.dump();
    const std::string change = std::to_string(groups) + " -> " + r.at("to").dump();
    if (r.at("why") == "measured") {
      EXPECT_GT(r.at("to_steps_per_s").get<double>(), r.at("from_steps_per_s").get<double>()) << d.dump();
      EXPECT_NE(automatic.log.find("decode groups re-tuned by measurement at " + std::to_string(at) +
                                   " live sequences: " + change),
                std::string::npos)
          << automatic.log;
    } else {
      ASSERT_EQ(r.at("why"), "live") << d.dump();
      EXPECT_TRUE(2 * at <= last_live || at >= 2 * last_live) << d.dump();
      EXPECT_NE(automatic.log.find("decode groups re-tuned for " + std::to_string(at) + " live sequences: " + change),
                std::string::npos)
          << automatic.log;
      last_live = at;
    }
    groups = r.at("to").get<int>();
  }
  // The last sequence decodes alone: at most kStages live sequences allow one group a stage only.
  EXPECT_EQ(groups, kStages) << d.dump();
  EXPECT_NE(automatic.log.find("decode groups: " + std::to_string(retunes.size()) + " re-tunes between waves"),
            std::string::npos)
      << automatic.log;

  for (const char* fixed_groups : {"4", "8"}) {
    const JobResult fixed = run_job(model, std::string("g") + fixed_groups, std::string("--decode-groups ") + fixed_groups);
    EXPECT_EQ(automatic.outputs.tokens, fixed.outputs.tokens) << "--decode-groups " << fixed_groups;
    EXPECT_EQ(automatic.outputs.logprob_bits, fixed.outputs.logprob_bits) << "--decode-groups " << fixed_groups;
    EXPECT_FALSE(fixed.decode_groups.contains("retunes")) << "an explicit count never re-tunes: " << fixed.decode_groups.dump();
    EXPECT_EQ(fixed.log.find("re-tuned"), std::string::npos) << fixed.log;
  }
}

}  // namespace
