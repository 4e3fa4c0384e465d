// --expert-parallel as a whole job on the synthetic MoE models: 2 ranks (one stage, E=2), 4 ranks (2 stages
// x E=2) and 8 ranks (2 stages x E=2 x 2 replicas) give one rank's tokens and log-probs bit for bit, in the
// JSONL (the same bytes) and the HDF5 results (tokens and log-prob bits); each member holds half the experts
// and traces its computing; each group splits some of its micro-batches by sequence; bad combinations are
// refused by name.
#include <gtest/gtest.h>

#include <regex>

#include "common/job_runner.h"
#include "common/results_match.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"

namespace {

const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";

struct Outputs {
  std::string jsonl;  // the JSONL output's bytes
  std::vector<glacier::io::ResultRecord> rows;
  std::vector<glacier::io::TraceRow> trace;
  std::string log;
};

Outputs run_job(const std::string& model, const std::string& dir, int np, const std::string& extra) {
  const std::string name = dir + "/np" + std::to_string(np) + std::regex_replace(extra, std::regex("[ -]+"), "_");
  auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + name +
                                                   ".jsonl --out " + name + ".h5 --max-tokens 16 " + extra);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (run.exit_code != 0) return {};
  return {glacier::testing::read_text(name + ".jsonl"), glacier::io::read_finished(name + ".h5").rows,
          glacier::io::read_trace(name + ".h5"), run.output};
}

// Expert bytes each rank logs it holds: "rank R holds X of its layers' Y MiB of expert weights".
std::vector<std::pair<double, double>> held_expert_mib(const std::string& log) {
  std::vector<std::pair<double, double>> out;
  const std::regex line(R"(holds ([0-9.]+) of its layers' ([0-9.]+) MiB of expert weights)");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
    out.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  return out;
}

// Micro-batches each group split by sequence, as its leader logs them: "expert group split N of the job's".
std::vector<long long> split_counts(const std::string& log) {
  std::vector<long long> out;
  const std::regex line(R"(expert group split ([0-9]+) of the job's micro-batches)");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) out.push_back(std::stoll((*it)[1]));
  return out;
}

void expect_same_as_one_rank(const std::string& model, const std::string& scratch) {
  const std::string dir = glacier::testing::scratch_dir(scratch);
  const Outputs one = run_job(model, dir, 1, "");
  size_t generated = 0;  // tokens of the rows that ran (the prompt file holds a few meant to fail)
  for (const glacier::io::ResultRecord& r : one.rows) generated += r.tokens.size();
  ASSERT_GT(generated, 100u);
  const auto reference = glacier::testing::rows_by_id(one.rows, "1 rank");
  for (const auto& [np, extra] : std::vector<std::pair<int, std::string>>{
           {2, "--expert-parallel 2"}, {4, "--expert-parallel 2"}, {8, "--expert-parallel 2 --replicas 2"}}) {
    const std::string what = std::to_string(np) + " ranks " + extra;
    const Outputs o = run_job(model, dir, np, extra);
    glacier::testing::expect_same_jsonl(one.jsonl, o.jsonl, "1 rank", what);
    glacier::testing::expect_same_results(o.rows, reference, what + " (HDF5)");
    // Every rank holds half its layers' experts (the figures are rounded to 0.1 MiB).
    const auto held = held_expert_mib(o.log);
    EXPECT_EQ(held.size(), static_cast<size_t>(np)) << what << "\n" << o.log;
    for (const auto& [mine, all] : held) EXPECT_NEAR(mine * 2, all, 0.2) << what;
    // Every rank's computing is in the trace, the members' too (their layers for the leader's micro-batches).
    std::vector<int> compute_rows(static_cast<size_t>(np), 0);
    for (const glacier::io::TraceRow& row : o.trace)
      if (row.phase == glacier::io::TracePhase::Compute && row.rank >= 0 && row.rank < np) ++compute_rows[static_cast<size_t>(row.rank)];
    for (int r = 0; r < np; ++r) EXPECT_GT(compute_rows[static_cast<size_t>(r)], 0) << what << ": rank " << r << " has no compute row";
    // Each group's leader logs the micro-batches its members split by sequence: some, with these prompts in flight.
    const std::vector<long long> splits = split_counts(o.log);
    EXPECT_EQ(splits.size(), static_cast<size_t>(np / 2)) << what << ": one line a group\n" << o.log;
    for (long long n : splits) EXPECT_GT(n, 0) << what << "\n" << o.log;
  }
}

TEST(ExpertParallelJob, MixtralWithExpertsSplitGivesOneRanksResultsBitForBit) {
  GLACIER_REQUIRE_SHARED(model, "models/synthetic/synth-mixtral-q8_0.gguf");
  expect_same_as_one_rank(model, "ep-mixtral");
}

TEST(ExpertParallelJob, Qwen2MoeWithSharedExpertSplitGivesOneRanksResultsBitForBit) {
  GLACIER_REQUIRE_SHARED(model, "models/synthetic/synth-qwen2moe-f32.gguf");
  expect_same_as_one_rank(model, "ep-qwen2moe");
}

// Samples (slot copies before the chunks) and speculative steps (several tokens of a sequence in one chunk)
// through groups that split their micro-batches by sequence: one rank's JSONL bytes on 2 and 4 ranks.
TEST(ExpertParallelJob, SamplesAndSpeculativeStepsSplitBySequenceGiveOneRanksBytes) {
  GLACIER_REQUIRE_SHARED(model, "models/synthetic/synth-qwen2moe-f32.gguf");
  const std::string dir = glacier::testing::scratch_dir("ep-samples");
  for (const std::string& extra : {std::string("--n 3 --temperature 0.8 --seed 5"), std::string("--speculate lookup --draft-max 4")}) {
    const Outputs one = run_job(model, dir, 1, extra);
    ASSERT_FALSE(one.jsonl.empty()) << extra;
    for (int np : {2, 4}) {
      const Outputs o = run_job(model, dir, np, "--expert-parallel 2 " + extra);
      glacier::testing::expect_same_jsonl(one.jsonl, o.jsonl, "1 rank", std::to_string(np) + " ranks " + extra);
      const std::vector<long long> splits = split_counts(o.log);
      EXPECT_EQ(splits.size(), static_cast<size_t>(np / 2)) << o.log;
      for (long long n : splits) EXPECT_GT(n, 0) << np << " ranks " << extra << "\n" << o.log;
    }
  }
}

// Each refusal names the option, what was expected and what was found, and the job exits non-zero.
void expect_refused(int np, const std::string& model, const std::string& extra, const std::string& message) {
  const std::string dir = glacier::testing::scratch_dir("ep-refused");
  auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + dir +
                                                   "/r.jsonl --max-tokens 4 " + extra);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << run.output;
}

// The memory check counts what a member holds: with no memory to offer, the refusal's need for two members
// of one stage is less than twice one rank's (each holds half the experts), not the whole layers twice.
double refused_need_mib(int np, const std::string& model, const std::string& extra) {
  const std::string dir = glacier::testing::scratch_dir("ep-memory");
  auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + dir +
                                                   "/r.jsonl --max-tokens 4 --max-memory-gib 0.00001 --ctx 64 --ubatch 8 " + extra);
  EXPECT_NE(run.exit_code, 0) << run.output;
  std::smatch m;
  const std::regex need(R"(that need ([0-9.]+) MiB)");
  if (!std::regex_search(run.output, m, need)) {
    ADD_FAILURE() << "no memory refusal in:\n" << run.output;
    return 0.0;
  }
  return std::stod(m[1]);
}

TEST(ExpertParallelJob, TheMemoryCheckCountsAMembersShareOfTheExperts) {
  // f32 at a short context: the experts are most of each rank's need (1.6 MiB for one rank; two members
  // counted as holding every expert need 3.2, each holding half of them 2.1).
  GLACIER_REQUIRE_SHARED(moe, "models/synthetic/synth-mixtral-f32.gguf");
  const double one = refused_need_mib(1, moe, "");
  const double members = refused_need_mib(2, moe, "--expert-parallel 2");
  EXPECT_GT(one, 0.0);
  EXPECT_LT(members, 2 * one - 0.5) << "two members of one stage counted as holding every expert";
}

TEST(ExpertParallelJob, BadCombinationsAreRefusedNamingTheOption) {
  GLACIER_REQUIRE_SHARED(moe, "models/synthetic/synth-mixtral-q8_0.gguf");
  GLACIER_REQUIRE_SHARED(dense, "models/synthetic/synth-llama-q8_0.gguf");
  expect_refused(2, dense, "--expert-parallel 2",
                 "option --expert-parallel: expected 1 for " + dense + ", which has no mixture-of-experts layers");
  expect_refused(3, moe, "--expert-parallel 3", "option --expert-parallel: expected a divisor of the model's 4 experts");
  expect_refused(3, moe, "--expert-parallel 2",
                 "option --expert-parallel: expected a divisor of the job's 3 ranks (ranks = stages x "
                 "expert-parallel x replicas), found 2");
  expect_refused(2, moe, "--expert-parallel 2 --partition measured", "option --partition: expected bytes or memory");
  expect_refused(1, moe, "--expert-parallel 0", "option --expert-parallel: expected a count in 1..");
}

}  // namespace
