// A model whose shards do not fit the memory the job may use (--max-memory-gib) is refused on every
// rank before any weight is read: one message with the rank count that would fit, exit code 2, fast.
#include <gtest/gtest.h>

#include <fstream>

#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

using glacier::testing::run_glacier;

constexpr int kExitInputError = 2;  // src/app/job.h
// A refusal happens at start-up: mpirun (~0.4 s here) plus reading the header; 5 s is the bound.
constexpr double kRefusalSeconds = 5.0;
// stories260K at --ctx 2048 and --ubatch 8 needs 3.9 MiB in all (its KV cache dominates; the driver's
// in-flight send and return buffers, sampling settings included, take a few hundred KiB); 3.1 MiB for
// the host's two ranks is too little, but 4 ranks of 1.5 MiB would hold it.
constexpr const char* kTightMemoryGiB = "0.003";

TEST(JobMemoryFit, ModelThatDoesNotFitIsRefusedBeforeLoading) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("memory-fit");
  std::ofstream(dir + "/p.txt") << "Once upon a time\n";
  const auto run = run_glacier(2, "--model " + model + " --prompts " + dir + "/p.txt --jsonl " + dir +
                                      "/r.jsonl --ctx 2048 --ubatch 8 --max-memory-gib " + kTightMemoryGiB,
                               30);
  EXPECT_EQ(run.exit_code, kExitInputError) << run.output;
  EXPECT_LT(run.seconds, kRefusalSeconds) << run.output;
  const std::string message = model + ": the model does not fit in memory: host ";
  const size_t at = run.output.find(message);
  ASSERT_NE(at, std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(message, at + 1), std::string::npos) << "printed more than once\n" << run.output;
  EXPECT_NE(run.output.find("runs 2 ranks (layers 0:3,3:5)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("it would fit on 4 ranks of 1.5 MiB"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("rank 0 of 2 on host"), std::string::npos) << "a shard was loaded\n" << run.output;
  std::ifstream jsonl(dir + "/r.jsonl");
  EXPECT_FALSE(jsonl.good()) << "no output is written by a refused job";
}

TEST(JobMemoryFit, ModelThatFitsRuns) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("memory-fit-ok");
  std::ofstream(dir + "/p.txt") << "Once upon a time\n";
  const auto run = run_glacier(2, "--model " + model + " --prompts " + dir + "/p.txt --jsonl " + dir +
                                      "/r.jsonl --ctx 2048 --ubatch 8 --max-tokens 4 --max-memory-gib 0.004",
                               30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
