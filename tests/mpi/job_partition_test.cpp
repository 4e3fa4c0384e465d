// With rank 1 slowed 3x (--slow-rank) on 2 ranks, --partition measured and --partition-from move layers
// off it, and every split (memory too) gives bitwise the byte split's tokens and log-probs (f32 wire);
// --partition-from's refusals name the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <variant>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "planning/partition.h"

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;

namespace {

constexpr int kExitInputError = 2;  // src/app/job.h
// Rank 1 computes this many times slower. With the model below (a head worth 1.33 layers) the measured
// split moves layers off rank 1 once it is more than ~1.4x slower per byte: 3x leaves a wide margin for
// noise in the calibration or the trace.
constexpr const char* kSlowRank = "1:3";
constexpr int kLayers = 8;

// A synthetic Q8_0 llama big enough for compute to dominate a micro-batch (8.6 MiB, 8 layers of 256).
std::string make_model(const std::string& dir) {
  const std::string path = dir + "/m.gguf";
  const std::string cmd = std::string(GLACIER_BUILD_DIR) +
                          "/glacier_mkmodel --preset tiny --n-embd 256 --n-layer " + std::to_string(kLayers) +
                          " --n-head 8 --n-head-kv 4 --n-ff 768 --n-vocab 4096 --type q8_0 --seed 7 --out " + path +
                          " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return path;
}

std::string make_prompts(const std::string& dir) {
  const std::string path = dir + "/prompts.jsonl";
  const char* words[] = {"the", "little", "cat", "sat", "on", "a", "warm", "mat", "and", "looked", "at", "the", "sun"};
  std::ofstream out(path);
  for (int i = 0; i < 12; ++i) {
    std::string prompt;
    for (int k = 0; k < 6 + 3 * i; ++k) prompt += std::string(k ? " " : "") + words[(i + k) % 13];
    out << R"({"id": "p)" << i << R"(", "prompt": ")" << prompt << "\"}\n";
  }
  return path;
}

// A scratch directory holding what every job here runs on: the model (m.gguf) and prompts (prompts.jsonl).
std::string job_dir(const std::string& scratch_name) {
  const std::string dir = glacier::testing::scratch_dir(scratch_name);
  make_model(dir);
  make_prompts(dir);
  return dir;
}

struct Outputs : glacier::testing::GeneratedById {
  std::vector<glacier::model::LayerRange> split;  // the run's layer_split attribute
};

Outputs run_job(const std::string& dir, const std::string& name, const std::string& extra) {
  const std::string args = "--model " + dir + "/m.gguf --prompts " + dir + "/prompts.jsonl --jsonl " + dir + "/" + name +
                           ".jsonl --out " + dir + "/" + name + ".h5 --max-tokens 16 --threads 1 --bind none " + extra;
  const auto run = run_glacier(2, args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  Outputs o;
  static_cast<glacier::testing::GeneratedById&>(o) = glacier::testing::read_generated(dir + "/" + name + ".jsonl");
  EXPECT_EQ(o.tokens.size(), 12u);
  if (run.exit_code == 0) {
    const auto attrs = glacier::io::read_root_attributes(dir + "/" + name + ".h5");
    o.split = glacier::planning::parse_layer_split(std::get<std::string>(attrs.at("layer_split")), kLayers, 2);
  }
  return o;
}

// Bitwise the same tokens and log-probs: what every split of the same job gives (f32 wire).
void expect_same_results(const Outputs& a, const Outputs& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logprob_bits, b.logprob_bits);
}

// `moved`'s split leaves the slowed rank 1 fewer layers than `base`'s, with the same results; the names
// say which run is which when it does not.
void expect_moved_off_the_slow_rank(const Outputs& base, const std::string& base_name, const Outputs& moved,
                                    const std::string& moved_name) {
  ASSERT_EQ(base.split.size(), 2u);
  ASSERT_EQ(moved.split.size(), 2u);
  EXPECT_LT(moved.split[1].size(), base.split[1].size())
      << base_name << " " << glacier::planning::format_layer_split(base.split) << ", " << moved_name << " "
      << glacier::planning::format_layer_split(moved.split);
  expect_same_results(moved, base);
}

TEST(PipelinePartition, MeasuredSplitMovesLayersOffASlowRankWithIdenticalResults) {
  const std::string dir = job_dir("partition-measured");
  const Outputs bytes = run_job(dir, "bytes", std::string("--slow-rank ") + kSlowRank);
  const Outputs measured = run_job(dir, "measured", std::string("--partition measured --slow-rank ") + kSlowRank);
  ASSERT_NO_FATAL_FAILURE(expect_moved_off_the_slow_rank(bytes, "bytes", measured, "measured"));
  // The memory split of one host's equal ranks is another valid split: the same results again.
  const Outputs memory = run_job(dir, "memory", "--partition memory");
  expect_same_results(memory, bytes);
}

TEST(PipelinePartition, SplitFromAnEarlierRunsTraceMovesLayersOffTheSlowRank) {
  const std::string dir = job_dir("partition-from");
  const Outputs earlier = run_job(dir, "earlier", std::string("--slow-rank ") + kSlowRank);
  const Outputs from = run_job(dir, "from", "--partition-from " + dir + "/earlier.h5 --slow-rank " + kSlowRank);
  ASSERT_NO_FATAL_FAILURE(expect_moved_off_the_slow_rank(earlier, "earlier", from, "from its trace"));

  // Another rank count than the earlier run's: refused before loading, naming the file.
  const std::string base = "--model " + dir + "/m.gguf --prompts " + dir + "/prompts.jsonl --jsonl " + dir + "/x.jsonl ";
  auto run = run_glacier(3, base + "--partition-from " + dir + "/earlier.h5", 30);
  EXPECT_EQ(run.exit_code, kExitInputError) << run.output;
  EXPECT_NE(run.output.find("option --partition-from " + dir +
                            "/earlier.h5: expected a run on the same 3 ranks as this job (speeds belong to ranks), "
                            "found a run on 2"),
            std::string::npos)
      << run.output;
  // A results file without a trace.
  const std::string no_trace = dir + "/no_trace.h5";
  { glacier::io::ResultsFile results(no_trace, glacier::io::ResultsFile::Mode::Create); }
  run = run_glacier(2, base + "--partition-from " + no_trace, 30);
  EXPECT_EQ(run.exit_code, kExitInputError) << run.output;
  EXPECT_NE(run.output.find("option --partition-from " + no_trace + ": trace file " + no_trace +
                            ": expected a group /trace, found none"),
            std::string::npos)
      << run.output;
}

}  // namespace
