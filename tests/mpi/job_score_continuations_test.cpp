// --mode score with {"context", "continuations": [...]}: one JSONL line per input line whose
// continuations carry the very sum_logprob, log-probs and greedy flag that separate
// {"context", "continuation"} lines give (bitwise), with their length-normalised scores; one HDF5 row
// per continuation (its index in `sample`); the context's rows are shared; a bad list fails its line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using nlohmann::json;

const std::vector<std::string> kContexts = {
    "Once upon a time there was a little girl named Lily. She liked to play outside with her",
    "Tom had a big red ball. He liked to kick it in the park every day with his",
};
const std::vector<std::string> kChoices = {" dog.", " friends.", " big red car that was blue.", " mom"};

struct Job {
  std::vector<json> rows;
  std::string log;
  std::string dir;
};

Job run(const std::string& model, const std::string& name, int np, const std::vector<json>& lines,
        const std::string& extra = "") {
  const auto job = glacier::testing::run_lines_job(model, "continuations-" + name, np, lines, "--mode score " + extra);
  return {glacier::testing::read_jsonl(job.dir + "/r.jsonl"), job.log, job.dir};
}

// "q<c>" or "q<c>-<k>" (built with +=: GCC 12 warns falsely on "literal" + std::string temporaries).
std::string line_id(size_t c, int k = -1) {
  std::string id = "q";
  id += std::to_string(c);
  if (k >= 0) {
    id += "-";
    id += std::to_string(k);
  }
  return id;
}

using glacier::testing::prefix_cache_tokens;

class JobScoreContinuations : public ::testing::TestWithParam<int> {};

TEST_P(JobScoreContinuations, EachContinuationScoresAsItsOwnLine) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::string tag = "np" + std::to_string(np);
  std::vector<json> multi, single;
  for (size_t c = 0; c < kContexts.size(); ++c) {
    multi.push_back({{"id", line_id(c)}, {"context", kContexts[c]}, {"continuations", kChoices}});
    for (size_t k = 0; k < kChoices.size(); ++k)
      single.push_back({{"id", line_id(c, static_cast<int>(k))},
                        {"context", kContexts[c]},
                        {"continuation", kChoices[k]}});
  }
  multi.push_back({{"id", "bad-n"}, {"context", kContexts[0]}, {"continuations", kChoices}, {"n", 2}});
  multi.push_back({{"id", "bad"}, {"context", kContexts[0]}, {"continuations", json::array()}});
  const Job one = run(model, "single-" + tag, np, single, "--prefix-sharing off");
  const Job many = run(model, "multi-" + tag, np, multi);
  ASSERT_EQ(many.rows.size(), kContexts.size() + 2) << "one line per input line";
  ASSERT_EQ(one.rows.size(), kContexts.size() * kChoices.size());
  for (size_t c = 0; c < kContexts.size(); ++c) {
    const json& line = many.rows[c];
    ASSERT_EQ(line["status"], "ok") << line.dump();
    ASSERT_EQ(line["continuations"].size(), kChoices.size());
    for (size_t k = 0; k < kChoices.size(); ++k) {
      const json& choice = line["continuations"][k];
      const json& alone = one.rows[c * kChoices.size() + k];
      ASSERT_EQ(alone["status"], "ok") << alone.dump();
      EXPECT_EQ(choice["index"], k);
      EXPECT_EQ(choice["tokens"], alone["tokens"]);
      EXPECT_EQ(choice["text"], alone["text"]);
      // Bitwise: the same shortest float32 decimals and the same summed double.
      EXPECT_EQ(choice["logprobs"].dump(), alone["logprobs"].dump());
      EXPECT_EQ(choice["sum_logprob"].dump(), alone["sum_logprob"].dump());
      EXPECT_EQ(choice["greedy"], alone["greedy"]);
      const double sum = alone["sum_logprob"].get<double>();
      EXPECT_EQ(choice["logprob_per_token"].get<double>(), sum / static_cast<double>(alone["tokens"].size()));
      EXPECT_EQ(choice["logprob_per_byte"].get<double>(), sum / static_cast<double>(kChoices[k].size()));
    }
    EXPECT_EQ(line["prompt_tokens"], one.rows[c * kChoices.size()]["prompt_tokens"]);
  }
  // A line whose samples would multiply its rows fails whole, every continuation with it.
  const json& bad_n = many.rows[kContexts.size()];
  EXPECT_EQ(bad_n["status"], "error");
  EXPECT_NE(bad_n["error"].get<std::string>().find("n of 2"), std::string::npos) << bad_n.dump();
  EXPECT_EQ(bad_n["continuations"].size(), kChoices.size());
  const json& bad = many.rows.back();
  EXPECT_EQ(bad["status"], "error");
  EXPECT_NE(bad["error"].get<std::string>().find("\"continuations\""), std::string::npos) << bad.dump();
  // The context was computed once a line: its rows went to the other continuations.
  EXPECT_GT(prefix_cache_tokens(many.log), 0) << many.log;

  // HDF5: one row per continuation, its index in `sample`, the same sums.
  const auto file = glacier::io::read_finished(many.dir + "/r.h5");
  std::vector<int> seen(kContexts.size(), 0);
  for (const auto& row : file.rows) {
    if (row.id == "bad" || row.id == "bad-n") continue;
    const size_t c = static_cast<size_t>(row.index);
    ASSERT_LT(c, kContexts.size());
    ASSERT_GE(row.sample, 0);
    ASSERT_LT(row.sample, static_cast<int64_t>(kChoices.size()));
    seen[c] |= 1 << row.sample;
    EXPECT_EQ(row.sum_logprob, many.rows[c]["continuations"][static_cast<size_t>(row.sample)]["sum_logprob"].get<double>());
  }
  for (int mask : seen) EXPECT_EQ(mask, (1 << kChoices.size()) - 1) << "a row for every continuation";
}

TEST_P(JobScoreContinuations, SharingOffGivesTheSameLines) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  std::vector<json> lines;
  for (size_t c = 0; c < kContexts.size(); ++c)
    lines.push_back({{"id", line_id(c)}, {"context", kContexts[c]}, {"continuations", kChoices}});
  const std::string tag = "np" + std::to_string(np);
  const Job on = run(model, "on-" + tag, np, lines, "--slots 3");
  const Job off = run(model, "off-" + tag, np, lines, "--slots 3 --prefix-sharing off");
  ASSERT_EQ(on.rows.size(), off.rows.size());
  for (size_t i = 0; i < on.rows.size(); ++i) EXPECT_EQ(on.rows[i].dump(), off.rows[i].dump());
  EXPECT_EQ(prefix_cache_tokens(off.log), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobScoreContinuations, ::testing::Values(1, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
