// A message damaged on any link of a 3-rank ring (GLACIER_TEST_CORRUPT_SEND flips a byte after the
// sender sealed it) ends the whole job cleanly with exit code 1 and a report naming the link and the
// micro-batch, and the results saved before it equal an undamaged run's; a malformed variable is
// refused before anything runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "pipeline/wire_integrity.h"

namespace {

using glacier::testing::run_glacier;

constexpr int kRanks = 3;
constexpr int kPromptCount = 48;
constexpr int kExitFailure = 1;     // src/app/job.h: a fault while running, flushed results kept
constexpr int kExitInputError = 2;
// 48 prompts x 16 tokens in 4 slots take about 280 micro-batches: the 100th message of a rank comes
// after some prompts have finished and well before the last.
constexpr int kDamagedMessage = 100;
constexpr int kJobTimeLimitS = 60;

// Sets GLACIER_TEST_CORRUPT_SEND for the jobs this process starts (mpiexec passes it on), and unsets it.
class CorruptSend {
 public:
  explicit CorruptSend(const std::string& value) { ::setenv(glacier::pipeline::kCorruptSendVariable, value.c_str(), 1); }
  ~CorruptSend() { ::unsetenv(glacier::pipeline::kCorruptSendVariable); }
};

class JobWireIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = glacier::testing::shared_path("models/stories260K.gguf");
    if (model_.empty()) GTEST_SKIP() << "needs models/stories260K.gguf under GLACIER_SHARED_DIR: not found, skipped";
    dir_ = glacier::testing::scratch_dir("job_wire_integrity");
    prompts_ = dir_ + "/prompts.jsonl";
    std::ofstream out(prompts_);
    for (int i = 0; i < kPromptCount; ++i)
      out << "{\"id\": \"p" << i << "\", \"prompt\": \"Once upon a time, a little cat number " << i << "\"}\n";
  }
  std::string args(const std::string& name) const {
    return "--model " + model_ + " --prompts " + prompts_ + " --out " + dir_ + "/" + name + ".h5 --jsonl " + dir_ +
           "/" + name + ".jsonl --max-tokens 16 --slots 4 --flush-every 1 --flush-seconds 600";
  }
  std::string model_, dir_, prompts_;
};

std::map<std::string, glacier::io::ResultRecord> rows_by_id(const std::string& h5) {
  std::map<std::string, glacier::io::ResultRecord> rows;
  for (auto& r : glacier::io::read_finished(h5).rows) rows.emplace(r.id, std::move(r));
  return rows;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), 4 * v.size());
  return b;
}

TEST_F(JobWireIntegrity, DamageOnEveryLinkEndsTheJobNamingLinkAndMicroBatchAndKeepsEarlierResults) {
  const auto sound = run_glacier(kRanks, args("sound"), kJobTimeLimitS);
  ASSERT_EQ(sound.exit_code, 0) << sound.output;
  const auto reference = rows_by_id(dir_ + "/sound.h5");
  ASSERT_EQ(reference.size(), size_t{kPromptCount});
  // World rank r sends to r + 1; the last stage sends the results back to rank 0.
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("damaged on rank " + std::to_string(rank));
    const std::string name = "damaged" + std::to_string(rank);
    CorruptSend aid(std::to_string(rank) + ":" + std::to_string(kDamagedMessage));
    const auto run = run_glacier(kRanks, args(name), kJobTimeLimitS);
    EXPECT_EQ(run.exit_code, kExitFailure) << run.output;
    EXPECT_EQ(run.output.find("MPI_ABORT"), std::string::npos) << "every rank should end on its own:\n" << run.output;
    const std::string link = "link rank " + std::to_string(rank) + " -> rank " + std::to_string((rank + 1) % kRanks);
    // The testing aid names the micro-batch it damaged; rank 0's closing error must name the same.
    std::smatch m;
    const std::regex damaged("damaged micro-batch ([0-9]+)'s message on the " + link);
    ASSERT_TRUE(std::regex_search(run.output, m, damaged)) << run.output;
    const std::string expected = "rank 0: error: wire integrity: damaged message on the " + link + ", micro-batch " +
                                 m[1].str() + ": the " + (rank == kRanks - 1 ? "results" : "activations") +
                                 "' checksum";
    EXPECT_NE(run.output.find(expected), std::string::npos) << "expected: " << expected << "\n" << run.output;
    // The results saved before the damage are there, and equal the undamaged run's bit for bit.
    const auto kept = rows_by_id(dir_ + "/" + name + ".h5");
    EXPECT_GT(kept.size(), 0u) << run.output;
    EXPECT_LT(kept.size(), size_t{kPromptCount}) << "the job ran to the end despite the damage";
    for (const auto& [id, row] : kept) {
      const auto& want = reference.at(id);
      EXPECT_EQ(row.tokens, want.tokens) << id;
      EXPECT_EQ(bits(row.logprobs), bits(want.logprobs)) << id;
    }
  }
}

TEST_F(JobWireIntegrity, MalformedTestingAidIsRefusedNamingIt) {
  CorruptSend aid("1-3");
  const auto run = run_glacier(kRanks, args("malformed"), kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, kExitInputError) << run.output;
  EXPECT_NE(run.output.find("GLACIER_TEST_CORRUPT_SEND: expected RANK:N"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("found '1-3'"), std::string::npos) << run.output;
}

}  // namespace
