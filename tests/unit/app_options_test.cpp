// Option parsing of the layer-split choice (--partition, --partition-from), --decode-groups and the --slow-rank testing
// aid: defaults, what --partition-from implies, and refusals that name the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/options.h"
#include "util/error.h"

namespace {

using glacier::InputError;
using glacier::app::JobOptions;

JobOptions parse(std::vector<std::string> extra) {
  std::vector<std::string> args = {"glacier_mpi", "--model", "m.gguf", "--prompts", "p.txt", "--jsonl", "r.jsonl"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return *glacier::app::parse_options(static_cast<int>(argv.size()), argv.data());
}

// The InputError's message, or "" when parsing succeeded.
std::string refusal(std::vector<std::string> extra) {
  try {
    parse(std::move(extra));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, PartitionDefaultsToBytesAndNoRankIsSlowed) {
  const JobOptions o = parse({});
  EXPECT_EQ(o.partition, "bytes");
  EXPECT_TRUE(o.partition_from.empty());
  EXPECT_EQ(o.slow_rank, -1);
  EXPECT_EQ(o.slow_factor, 1.0);
  EXPECT_EQ(parse({"--partition", "memory"}).partition, "memory");
}

TEST(Options, PartitionFromStandsForMeasured) {
  const JobOptions o = parse({"--partition-from", "old.h5"});
  EXPECT_EQ(o.partition, "measured");
  EXPECT_EQ(o.partition_from, "old.h5");
  EXPECT_EQ(parse({"--partition", "measured", "--partition-from", "old.h5"}).partition, "measured");
}

TEST(Options, ContradictoryPartitionOptionsAreRefused) {
  EXPECT_EQ(refusal({"--partition", "fast"}), "option --partition: expected bytes, memory or measured, found 'fast'");
  EXPECT_EQ(refusal({"--partition", "memory", "--partition-from", "old.h5"}),
            "option --partition: expected measured (or nothing) with --partition-from, found 'memory'");
  EXPECT_EQ(refusal({"--layers", "0:1,1:2", "--partition", "measured"}),
            "option --partition: expected bytes (the default) with a split by hand (--layers), found 'measured'");
  EXPECT_EQ(refusal({"--layers", "0:1,1:2", "--partition-from", "old.h5"}),
            "option --partition-from: expected no --layers (a split by hand), found both");
}

TEST(Options, SlowRankTakesRankAndFactor) {
  const JobOptions o = parse({"--slow-rank", "1:2.5"});
  EXPECT_EQ(o.slow_rank, 1);
  EXPECT_EQ(o.slow_factor, 2.5);
  for (const std::string bad : {"1", "1:", ":3", "-1:3", "1:0.5", "1:3x", "a:3", "1:5000"})
    EXPECT_EQ(refusal({"--slow-rank", bad}).rfind("option --slow-rank: expected RANK:FACTOR", 0), 0u) << bad;
}

}  // namespace

TEST(Options, DecodeGroupsDefaultToOneAStageAndRefuseNegatives) {
  EXPECT_EQ(parse({}).decode_groups, 0);
  EXPECT_EQ(parse({"--decode-groups", "8"}).decode_groups, 8);
  EXPECT_EQ(refusal({"--decode-groups", "-1"}), "option --decode-groups: expected a count >= 0, found -1");
}
