// The /trace of a 4-rank job is on one time axis: with every send held back by an injected delay, each
// stage starts a micro-batch no sooner than that delay after the stage before finished it, and rank 0
// takes each result no sooner than that after the last stage made it (clocks aligned to rank 0's).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_trace.h"

namespace {

using glacier::io::TracePhase;

constexpr int kRanks = 4;
constexpr double kInjectedDelayS = 0.002;  // --inject-latency-ms 2
// On top of the alignment error the file reports (per rank, half its fastest round trip to rank 0; a
// link between two ranks can be off by both): the gap between reading the clock and the event it
// times. 20 us; unaligned, the ranks' origins were 0.1-2.3 ms apart.
constexpr double kClockReadSlackS = 20e-6;

TEST(JobTrace, RanksShareOneTimeAxis) {
  const std::string dir = glacier::testing::scratch_dir("trace-clock");
  const std::string model = dir + "/m.gguf";
  const std::string mk = std::string(GLACIER_BUILD_DIR) +
                         "/glacier_mkmodel --preset tiny --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 256 "
                         "--n-vocab 1024 --type q8_0 --seed 3 --out " + model + " > /dev/null";
  ASSERT_EQ(std::system(mk.c_str()), 0) << mk;
  {
    std::ofstream prompts(dir + "/p.jsonl");
    for (int i = 0; i < 8; ++i) prompts << R"({"id": "p)" << i << R"(", "prompt": "the cat sat on mat )" << i << "\"}\n";
  }
  const auto run = glacier::testing::run_glacier(
      kRanks, "--model " + model + " --prompts " + dir + "/p.jsonl --out " + dir + "/r.h5 --max-tokens 6 --threads 1 " +
                  "--bind none --inject-latency-ms " + std::to_string(kInjectedDelayS * 1000.0));
  ASSERT_EQ(run.exit_code, 0) << run.output;

  const double clock_error = glacier::io::read_trace_clock_error(dir + "/r.h5");
  EXPECT_GT(clock_error, 0.0) << "a 4-rank trace without its clocks' alignment error";
  EXPECT_LT(clock_error, 0.001) << "ranks on one host trade messages in microseconds";
  const double tolerance = 2 * clock_error + kClockReadSlackS;
  std::map<std::pair<int, int64_t>, std::pair<double, double>> compute;  // (rank, micro-batch) -> [start, end]
  std::map<int64_t, double> result_taken;                                 // micro-batch -> rank 0's recv end
  for (const auto& row : glacier::io::read_trace(dir + "/r.h5")) {
    if (row.phase == TracePhase::Compute) compute[{row.rank, row.microbatch}] = {row.start, row.end};
    if (row.phase == TracePhase::Recv && row.rank == 0) result_taken[row.microbatch] = row.end;
  }
  std::map<int, int> checked;  // links checked: stage s-1 -> s, and kRanks for last -> rank 0
  for (const auto& [key, interval] : compute) {
    const auto [rank, mb] = key;
    if (rank == 0) continue;
    const auto before = compute.find({rank - 1, mb});
    ASSERT_NE(before, compute.end()) << "rank " << rank << " computed micro-batch " << mb << " that rank " << rank - 1
                                     << " never did";
    EXPECT_GE(interval.first, before->second.second + kInjectedDelayS - tolerance)
        << "rank " << rank << " started micro-batch " << mb << " " << (interval.first - before->second.second) * 1e3
        << " ms after rank " << rank - 1 << " finished it";
    ++checked[rank];
  }
  for (const auto& [mb, taken] : result_taken) {
    const auto last = compute.find({kRanks - 1, mb});
    ASSERT_NE(last, compute.end()) << "rank 0 took back micro-batch " << mb << " that the last rank never computed";
    EXPECT_GE(taken, last->second.second + kInjectedDelayS - tolerance)
        << "rank 0 took micro-batch " << mb << " back " << (taken - last->second.second) * 1e3
        << " ms after the last rank finished it";
    ++checked[kRanks];
  }
  for (int link = 1; link <= kRanks; ++link) EXPECT_GT(checked[link], 0) << "link " << link << " never checked";
}

}  // namespace
