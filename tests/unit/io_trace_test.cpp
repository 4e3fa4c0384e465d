// The /trace table (serial write, read back, phase names), the per-rank summary on a hand-made
// timeline with known fractions, and the Chrome trace-event JSON.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/input_error.h"
#include "common/test_env.h"
#include "io/chrome_trace.h"
#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"
#include "io/trace_summary.h"
#include "util/error.h"

namespace glacier::io {
namespace {

using glacier::testing::expect_input_error;

// Fractions below come from sums of a few binary-inexact decimals: allow rounding of a few ulps.
constexpr double kFractionTolerance = 1e-12;

// A 10-second job on two ranks, figures chosen by hand:
//   rank 0: recv [0,1), compute [1,4) and [5,8), send [7.5,8.5) (overlaps compute), wait [9,10)
//           covered: [0,4) + [5,8.5) + [9,10) = 8.5 s  -> bubble 1.5 s
//   rank 1: compute [2,3) twice (duplicate counts once), compute [2.5,6), recv [6,6.5)
//           covered: [2,6.5) = 4.5 s -> bubble 5.5 s
std::vector<TraceRow> hand_made_trace() {
  return {
      {0, 0, TracePhase::Recv, 0.0, 1.0, 16, 4096},   {0, 0, TracePhase::Compute, 1.0, 4.0, 16, 0},
      {0, 1, TracePhase::Compute, 5.0, 8.0, 8, 0},    {0, 1, TracePhase::Send, 7.5, 8.5, 8, 2048},
      {0, -1, TracePhase::Wait, 9.0, 10.0, 0, 0},     {1, 0, TracePhase::Compute, 2.0, 3.0, 16, 0},
      {1, 0, TracePhase::Compute, 2.0, 3.0, 16, 0},   {1, 1, TracePhase::Compute, 2.5, 6.0, 8, 0},
      {1, 1, TracePhase::Recv, 6.0, 6.5, 8, 2048},
  };
}

TEST(IoTrace, SummaryFractionsOfAHandMadeTrace) {
  TraceSummary s = summarize_trace(hand_made_trace());
  EXPECT_EQ(s.job_start, 0.0);
  EXPECT_EQ(s.job_end, 10.0);
  ASSERT_EQ(s.ranks.size(), 2u);
  const double span = s.span();
  const RankSummary& r0 = s.ranks[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_NEAR(r0.fraction(TracePhase::Compute, span), 0.6, kFractionTolerance);
  EXPECT_NEAR(r0.fraction(TracePhase::Recv, span), 0.1, kFractionTolerance);
  EXPECT_NEAR(r0.fraction(TracePhase::Send, span), 0.1, kFractionTolerance);
  EXPECT_NEAR(r0.fraction(TracePhase::Wait, span), 0.1, kFractionTolerance);
  EXPECT_NEAR(r0.bubble_fraction(span), 0.15, kFractionTolerance);
  EXPECT_EQ(r0.intervals, 5);
  const RankSummary& r1 = s.ranks[1];
  EXPECT_EQ(r1.rank, 1);
  EXPECT_NEAR(r1.fraction(TracePhase::Compute, span), 0.4, kFractionTolerance);
  EXPECT_NEAR(r1.fraction(TracePhase::Recv, span), 0.05, kFractionTolerance);
  EXPECT_NEAR(r1.fraction(TracePhase::Wait, span), 0.0, kFractionTolerance);
  EXPECT_NEAR(r1.bubble_fraction(span), 0.55, kFractionTolerance);
  std::string table = format_trace_summary(s);
  EXPECT_NE(table.find("bubble"), std::string::npos);
  EXPECT_NE(table.find("0.1500"), std::string::npos) << table;
}

TEST(IoTrace, EmptyTraceGivesEmptySummary) {
  TraceSummary s = summarize_trace({});
  EXPECT_TRUE(s.ranks.empty());
  EXPECT_EQ(s.span(), 0.0);
}

TEST(IoTrace, SerialWriteReadBackIntoAResultsFile) {
  const std::string path = glacier::testing::scratch_dir("io_trace") + "/results.h5";
  {
    ResultsFile results(path, ResultsFile::Mode::Create);
    ResultRecord r;
    r.id = "a";
    results.append(r);
  }
  const auto rows = hand_made_trace();
  write_trace(path, rows);
  write_trace(path, rows, 3.5e-6);  // a second write replaces /trace
  EXPECT_EQ(read_trace_clock_error(path), 3.5e-6);
  auto back = read_trace(path);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].rank, rows[i].rank);
    EXPECT_EQ(back[i].microbatch, rows[i].microbatch);
    EXPECT_EQ(back[i].phase, rows[i].phase);
    EXPECT_EQ(back[i].start, rows[i].start);
    EXPECT_EQ(back[i].end, rows[i].end);
    EXPECT_EQ(back[i].tokens, rows[i].tokens);
    EXPECT_EQ(back[i].bytes, rows[i].bytes);
  }
  EXPECT_EQ(read_finished(path).rows.size(), 1u) << "the results must survive the trace write";

  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with h5py not found: h5py check skipped";
  std::string cmd = "/usr/bin/python3 -c \"import h5py,sys; p=h5py.File(sys.argv[1],'r')['trace/phase']; "
                    "names=[n.decode() if isinstance(n,bytes) else n for n in p.attrs['phase_names']]; "
                    "sys.exit(0 if names==['recv','compute','send','wait','verify','draft'] and list(p[:2])==[0,1] else 1)\" " +
                    path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(IoTrace, SerialWriteCreatesAMissingFileAndEmptyTablesWork) {
  const std::string path = glacier::testing::scratch_dir("io_trace_new") + "/trace.h5";
  write_trace(path, {});
  EXPECT_TRUE(read_trace(path).empty());
  EXPECT_EQ(read_trace_clock_error(path), 0.0);
}

TEST(IoTrace, ReadingAFileWithoutTraceIsAnInputError) {
  const std::string path = glacier::testing::scratch_dir("io_trace_none") + "/results.h5";
  { ResultsFile results(path, ResultsFile::Mode::Create); }
  expect_input_error([&] { read_trace(path); }, {"/trace", path});
}

TEST(IoTrace, ChromeTraceEventsInMicroseconds) {
  nlohmann::json j = chrome_trace_events(hand_made_trace(), TraceLayout{2, {}});
  const auto& events = j["traceEvents"];
  size_t complete = 0;
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    if (complete == 1) {  // rank 0's first compute interval [1, 4) s
      EXPECT_EQ(e["name"], "compute");
      EXPECT_EQ(e["ts"].get<double>(), 1e6);
      EXPECT_EQ(e["dur"].get<double>(), 3e6);
      EXPECT_EQ(e["tid"], 0);
      EXPECT_EQ(e["pid"], 0);
      EXPECT_EQ(e["args"]["tokens"], 16);
      EXPECT_EQ(e["args"]["microbatch"], 0);
    }
    ++complete;
  }
  EXPECT_EQ(complete, hand_made_trace().size());
}

// Speculation's rows on one 10-second rank: compute [0,2), verify [2,5) (a micro-batch with drafts),
// the driver's draft [5,5.5), recv [5.5,6).
TEST(IoTrace, VerifyCountsAsComputeAndDraftIsItsOwnRow) {
  const std::vector<TraceRow> rows = {{0, 0, TracePhase::Compute, 0.0, 2.0, 4, 0},
                                      {0, 1, TracePhase::Verify, 2.0, 5.0, 12, 0},
                                      {0, 2, TracePhase::Draft, 5.0, 5.5, 8, 0},
                                      {0, 1, TracePhase::Recv, 5.5, 6.0, 0, 64},
                                      {0, -1, TracePhase::Wait, 9.0, 10.0, 0, 0}};
  const TraceSummary s = summarize_trace(rows);
  ASSERT_EQ(s.ranks.size(), 1u);
  const double span = s.span();
  EXPECT_NEAR(s.ranks[0].fraction(TracePhase::Compute, span), 0.5, kFractionTolerance);
  EXPECT_NEAR(s.ranks[0].fraction(TracePhase::Verify, span), 0.3, kFractionTolerance);
  EXPECT_NEAR(s.ranks[0].fraction(TracePhase::Draft, span), 0.05, kFractionTolerance);
  EXPECT_NEAR(s.ranks[0].bubble_fraction(span), 0.3, kFractionTolerance);
  std::multiset<std::string> names;
  const nlohmann::json j = chrome_trace_events(rows, TraceLayout{1, {}});
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  EXPECT_EQ(names, (std::multiset<std::string>{"compute", "verify", "draft", "recv", "wait"}));
}

// Two replicas of two stages on hosts a and b. Micro-batch 0 of each replica goes stage 0 -> stage 1
// (a flow) and back to stage 0 as results (no flow); replica 1's rank 2 reuses id 0, which must not
// join replica 0's ranks.
std::vector<TraceRow> two_replica_trace() {
  return {
      {0, 0, TracePhase::Send, 1.0, 1.1, 4, 512},  {1, 0, TracePhase::Recv, 1.2, 1.3, 4, 512},
      {1, 0, TracePhase::Send, 2.0, 2.1, 4, 64},   {0, 0, TracePhase::Recv, 2.2, 2.3, 0, 64},
      {2, 0, TracePhase::Send, 1.5, 1.6, 4, 512},  {3, 0, TracePhase::Recv, 1.7, 1.8, 4, 512},
      {3, 0, TracePhase::Send, 2.5, 2.6, 4, 64},   {2, 0, TracePhase::Recv, 2.7, 2.8, 0, 64},
  };
}

TEST(IoTrace, ChromeTraceNamesEachRankByReplicaStageAndHost) {
  const std::map<std::string, AttributeValue> attrs = {{"layer_split", std::string("0:3,3:5")},
                                                       {"hosts", std::string("a,a,b,b")}};
  const TraceLayout layout = trace_layout(attrs, two_replica_trace(), "r.h5");
  EXPECT_EQ(layout.stages, 2);
  const nlohmann::json j = chrome_trace_events(two_replica_trace(), layout);
  std::map<int, std::string> names;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "replica 0 / stage 0 @ a"},
                                               {1, "replica 0 / stage 1 @ a"},
                                               {2, "replica 1 / stage 0 @ b"},
                                               {3, "replica 1 / stage 1 @ b"}}));
}

TEST(IoTrace, ChromeTraceFlowsFollowEachForwardHop) {
  const nlohmann::json j = chrome_trace_events(two_replica_trace(), TraceLayout{2, {}});
  std::map<int64_t, nlohmann::json> starts, finishes;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<int64_t>()] = e;
    if (e["ph"] == "f") finishes[e["id"].get<int64_t>()] = e;
  }
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  std::set<std::pair<int, int>> hops;
  for (const auto& [id, s] : starts) {
    const auto& f = finishes.at(id);
    hops.insert({s["pid"].get<int>(), f["pid"].get<int>()});
    EXPECT_EQ(f["bp"], "e");  // bound to the receive interval it falls in
    EXPECT_LT(s["ts"].get<double>(), f["ts"].get<double>());
  }
  EXPECT_EQ(hops, (std::set<std::pair<int, int>>{{0, 1}, {2, 3}}));
}

TEST(IoTrace, ChromeTraceLayoutRefusesHostsThatAreNotWholeReplicas) {
  const std::map<std::string, AttributeValue> attrs = {{"layer_split", std::string("0:3,3:5")},
                                                       {"hosts", std::string("a,a,b")}};
  expect_input_error([&] { trace_layout(attrs, {{2, 0, TracePhase::Send, 0, 1, 1, 1}}, "r.h5"); }, {"hosts", "r.h5"});
}

}  // namespace
}  // namespace glacier::io
