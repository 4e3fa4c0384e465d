// Option parsing: the layer-split choice (--partition, --partition-from), --expert-parallel, --decode-groups,
// the --slow-rank testing aid, no abbreviations, strict seeds and the bounds of every figure: defaults and
// refusals that name the option.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "app/options.h"
#include "common/input_error.h"
#include "planning/partition.h"
#include "util/error.h"

namespace {

using glacier::InputError;
using glacier::app::JobMode;
using glacier::app::JobOptions;
using glacier::app::Speculation;
using glacier::planning::Partition;

JobOptions parse(std::vector<std::string> extra) {
  std::vector<std::string> args = {"glacier_mpi", "--model", "m.gguf", "--prompts", "p.txt", "--jsonl", "r.jsonl"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return *glacier::app::parse_options(static_cast<int>(argv.size()), argv.data());
}

// The InputError's message, or "" when parsing succeeded.
std::string refusal(std::vector<std::string> extra) {
  return glacier::testing::refusal_message([&] { parse(std::move(extra)); });
}

TEST(Options, PartitionDefaultsToBytesAndNoRankIsSlowed) {
  const JobOptions o = parse({});
  EXPECT_EQ(o.partition, Partition::Bytes);
  EXPECT_TRUE(o.partition_from.empty());
  EXPECT_EQ(o.slow_rank, -1);
  EXPECT_EQ(o.slow_factor, 1.0);
  EXPECT_EQ(parse({"--partition", "memory"}).partition, Partition::Memory);
}

TEST(Options, PartitionFromStandsForMeasured) {
  const JobOptions o = parse({"--partition-from", "old.h5"});
  EXPECT_EQ(o.partition, Partition::Measured);
  EXPECT_EQ(o.partition_from, "old.h5");
  EXPECT_EQ(parse({"--partition", "measured", "--partition-from", "old.h5"}).partition, Partition::Measured);
}

TEST(Options, ContradictoryPartitionOptionsAreRefused) {
  EXPECT_EQ(refusal({"--partition", "fast"}), "option --partition: expected bytes, memory or measured, found 'fast'");
  EXPECT_EQ(refusal({"--partition", "memory", "--partition-from", "old.h5"}),
            "option --partition: expected measured (or nothing) with --partition-from, found 'memory'");
  EXPECT_EQ(refusal({"--layers", "0:1,1:2", "--partition", "measured"}),
            "option --partition: expected bytes (the default) with a split by hand (--layers), found 'measured'");
  EXPECT_EQ(refusal({"--layers", "0:1,1:2", "--partition-from", "old.h5"}),
            "option --partition-from: expected no --layers (a split by hand), found both");
  // --layers is read as ranges with the options (its form refused before any model is opened); whether it
  // fits the model and the ranks is checked with them (planning_layout_test, pipeline_equivalence_test).
  EXPECT_EQ(glacier::planning::format_layer_split(parse({"--layers", "0:2,2:5"}).layers), "0:2,2:5");
  EXPECT_TRUE(parse({}).layers.empty());
  EXPECT_EQ(refusal({"--layers", "0:2,2-5"}), "option --layers '0:2,2-5': expected ranges FIRST:LAST separated by commas, found '2-5'");
}

TEST(Options, ExpertParallelDefaultsToOneAndRefusesZeroAndTheMeasuredSplit) {
  EXPECT_EQ(parse({}).expert_parallel, 1);
  EXPECT_EQ(parse({"--expert-parallel", "4"}).expert_parallel, 4);
  EXPECT_EQ(refusal({"--expert-parallel", "0"}), "option --expert-parallel: expected a count in 1..1024, found 0");
  EXPECT_EQ(refusal({"--expert-parallel", "2", "--partition", "measured"}),
            "option --partition: expected bytes or memory with --expert-parallel 2 (the measured calibration times "
            "each rank's layers alone, with every expert), found 'measured'");
  EXPECT_EQ(refusal({"--expert-parallel", "2", "--partition-from", "old.h5"}).rfind("option --partition: expected bytes or memory", 0), 0u);
  EXPECT_EQ(parse({"--expert-parallel", "1", "--partition", "measured"}).partition, Partition::Measured);
}

TEST(Options, SlowRankTakesRankAndFactor) {
  const JobOptions o = parse({"--slow-rank", "1:2.5"});
  EXPECT_EQ(o.slow_rank, 1);
  EXPECT_EQ(o.slow_factor, 2.5);
  for (const std::string bad : {"1", "1:", ":3", "-1:3", "1:0.5", "1:3x", "a:3", "1:5000"})
    EXPECT_EQ(refusal({"--slow-rank", bad}).rfind("option --slow-rank: expected RANK:FACTOR", 0), 0u) << bad;
}

}  // namespace

TEST(Options, DecodeGroupsDefaultToAutoAndRefuseNegatives) {
  EXPECT_EQ(parse({}).decode_groups, glacier::app::kDecodeGroupsAuto);
  EXPECT_EQ(parse({"--decode-groups", "auto"}).decode_groups, glacier::app::kDecodeGroupsAuto);
  EXPECT_EQ(parse({"--decode-groups", "0"}).decode_groups, 0);
  EXPECT_EQ(parse({"--decode-groups", "8"}).decode_groups, 8);
  EXPECT_EQ(refusal({"--decode-groups", "-1"}), "option --decode-groups: expected a count in 0..65536 or 'auto', found '-1'");
  EXPECT_EQ(refusal({"--decode-groups", "8x"}), "option --decode-groups: expected a count in 0..65536 or 'auto', found '8x'");
}

namespace {

std::string config_file(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(Options, AbbreviationsAreRefusedOnTheCommandLineAndInIniFiles) {
  // Boost would otherwise take a unique prefix for the whole name: --te for --temperature.
  EXPECT_EQ(refusal({"--te", "0.5"}), "options: unrecognised option '--te' (see --help)");
  EXPECT_EQ(refusal({"--max-token", "3"}), "options: unrecognised option '--max-token' (see --help)");
  EXPECT_EQ(parse({"--temperature", "0.5"}).temperature, 0.5f);
  const std::string ini = config_file("abbrev.ini", "te = 0.5\n");
  EXPECT_NE(refusal({"--config", ini}).find("unrecognised option 'te'"), std::string::npos) << refusal({"--config", ini});
  EXPECT_EQ(parse({"--config", config_file("full.ini", "temperature = 0.5\n")}).temperature, 0.5f);
}

TEST(Options, SeedIsAnUnsigned64BitDecimalReadStrictly) {
  EXPECT_EQ(parse({}).seed, 0u);
  EXPECT_EQ(parse({"--seed", "18446744073709551615"}).seed, UINT64_MAX);
  EXPECT_EQ(parse({"--seed", "42"}).seed, 42u);
  for (const std::string bad : {"-1", "18446744073709551616", "+1", "0x10", "1e3", "", " 1", "1 "})
    EXPECT_EQ(refusal({"--seed", bad}), "option --seed: expected an integer in 0..18446744073709551615, found '" + bad + "'");
}

TEST(Options, FiguresThatCannotBeHonouredAreRefused) {
  EXPECT_EQ(refusal({"--temperature", "inf"}), "option --temperature: expected a finite value >= 0, found inf");
  EXPECT_EQ(refusal({"--temperature", "nan"}), "option --temperature: expected a finite value >= 0, found nan");
  // GiB past 2^34 would overflow 64-bit bytes; inf used to become "the host offers 0.0 MiB".
  EXPECT_EQ(refusal({"--max-memory-gib", "1.8e10"}), "option --max-memory-gib: expected GiB in [0, 1048576], found 1.8e+10");
  EXPECT_EQ(refusal({"--max-memory-gib", "inf"}), "option --max-memory-gib: expected GiB in [0, 1048576], found inf");
  EXPECT_EQ(parse({"--max-memory-gib", "1048576"}).max_memory_gib, 1048576.0);
  EXPECT_EQ(refusal({"--flush-seconds", "nan"}), "option --flush-seconds: expected seconds in [0, 10000000], found nan");
  EXPECT_EQ(refusal({"--stall-timeout", "inf"}), "option --stall-timeout: expected seconds in [0, 10000000], found inf");
  EXPECT_EQ(refusal({"--ctx", "1048577"}), "option --ctx: expected a length in 0..1048576, found 1048577");
  EXPECT_EQ(refusal({"--slots", "65537"}), "option --slots: expected a count in 0..65536, found 65537");
}

TEST(Options, ThreadsHaveAnUpperBoundAndTheOversubscriptionSwitch) {
  EXPECT_FALSE(parse({}).oversubscribe_threads);
  EXPECT_TRUE(parse({"--threads", "64", "--oversubscribe-threads"}).oversubscribe_threads);
  EXPECT_EQ(refusal({"--threads", "4097", "--oversubscribe-threads"}), "option --threads: expected a count in 0..4096, found 4097");
  EXPECT_EQ(refusal({"--threads", "-1"}), "option --threads: expected a count in 0..4096, found -1");
}

TEST(Options, DecodeGroupsStayWithinTheSlots) {
  EXPECT_EQ(parse({"--slots", "8", "--decode-groups", "8"}).decode_groups, 8);
  EXPECT_EQ(refusal({"--slots", "4", "--decode-groups", "8"}), "option --decode-groups: expected at most --slots (4), found 8");
  EXPECT_EQ(refusal({"--decode-groups", "1000000"}), "option --decode-groups: expected a count in 0..65536 or 'auto', found '1000000'");
  EXPECT_EQ(parse({"--slots", "2", "--decode-groups", "auto"}).decode_groups, glacier::app::kDecodeGroupsAuto)
      << "auto stays within the slots by itself";
  EXPECT_EQ(parse({"--decode-groups", "64"}).decode_groups, 64) << "sized slots are raised to the groups";
}

}  // namespace

namespace {

TEST(Options, SamplingControlsAreReadAndRangeChecked) {
  const JobOptions d = parse({});
  EXPECT_EQ(d.repetition_penalty, 1.0f);
  EXPECT_EQ(d.presence_penalty, 0.0f);
  EXPECT_EQ(d.frequency_penalty, 0.0f);
  EXPECT_EQ(d.min_tokens, 0);
  EXPECT_FALSE(d.ignore_eos);
  EXPECT_FALSE(d.include_stop_str_in_output);
  EXPECT_TRUE(d.stop_token_ids.empty());
  EXPECT_TRUE(d.logit_bias.empty());
  const JobOptions o = parse({"--repetition-penalty", "1.3", "--presence-penalty", "-2", "--frequency-penalty", "2",
                              "--min-tokens", "5", "--max-tokens", "5", "--ignore-eos", "--include-stop-str-in-output",
                              "--stop-token-ids", "13,2", "--stop-token-ids", "7", "--logit-bias", "29:-100,3:2.5",
                              "--logit-bias", "0:100"});
  EXPECT_EQ(o.repetition_penalty, 1.3f);
  EXPECT_EQ(o.presence_penalty, -2.0f);
  EXPECT_EQ(o.frequency_penalty, 2.0f);
  EXPECT_EQ(o.min_tokens, 5);
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_TRUE(o.include_stop_str_in_output);
  EXPECT_EQ(o.stop_token_ids, (std::vector<int32_t>{13, 2, 7}));
  const std::vector<std::pair<int32_t, float>> bias = {{0, 100.0f}, {3, 2.5f}, {29, -100.0f}};
  EXPECT_EQ(o.logit_bias, bias);

  EXPECT_EQ(refusal({"--repetition-penalty", "0"}), "option --repetition-penalty: expected a finite value > 0 (1 = off), found 0");
  EXPECT_EQ(refusal({"--repetition-penalty", "inf"}), "option --repetition-penalty: expected a finite value > 0 (1 = off), found inf");
  EXPECT_EQ(refusal({"--presence-penalty", "2.5"}), "option --presence-penalty: expected a value in [-2, 2], found 2.5");
  EXPECT_EQ(refusal({"--frequency-penalty", "nan"}), "option --frequency-penalty: expected a value in [-2, 2], found nan");
  EXPECT_EQ(refusal({"--min-tokens", "129"}), "option --min-tokens: expected a count in 0..--max-tokens (128), found 129");
  EXPECT_EQ(refusal({"--min-tokens", "-1"}), "option --min-tokens: expected a count in 0..--max-tokens (128), found -1");
  const std::string ids = "option --stop-token-ids: expected at most 1024 distinct token ids (integers >= 0, comma-separated or "
                          "repeated), found ";
  EXPECT_EQ(refusal({"--stop-token-ids", "13,-1"}), ids + "'-1'");
  EXPECT_EQ(refusal({"--stop-token-ids", "13,,2"}), ids + "''");
  EXPECT_EQ(refusal({"--stop-token-ids", "13", "--stop-token-ids", "13"}), ids + "'13'");
  EXPECT_EQ(refusal({"--stop-token-ids", "2147483648"}), ids + "'2147483648'");
  const std::string bias_msg = "option --logit-bias: expected at most 1024 entries ID:BIAS with distinct token ids >= 0 and biases "
                               "in [-100, 100] (comma-separated or repeated, e.g. 13:-100,29:2.5), found ";
  EXPECT_EQ(refusal({"--logit-bias", "13:101"}), bias_msg + "'13:101'");
  EXPECT_EQ(refusal({"--logit-bias", "13"}), bias_msg + "'13'");
  EXPECT_EQ(refusal({"--logit-bias", "13:1,13:2"}), bias_msg + "'13:2'");
  EXPECT_EQ(refusal({"--logit-bias", "x:1"}), bias_msg + "'x:1'");
  EXPECT_EQ(refusal({"--logit-bias", "1:nan"}), bias_msg + "'1:nan'");
}

}  // namespace

TEST(Options, SamplesPerPromptAreRangeCheckedAndOnlyForGenerate) {
  const glacier::app::JobOptions o = parse({"--n", "16", "--n-prefill", "each"});
  EXPECT_EQ(o.n, 16);
  EXPECT_FALSE(o.share_prefill);
  EXPECT_EQ(parse({}).n, 1);
  EXPECT_TRUE(parse({}).share_prefill);
  EXPECT_EQ(refusal({"--n", "0"}), "option --n: expected a count in 1..128, found 0");
  EXPECT_EQ(refusal({"--n", "129"}), "option --n: expected a count in 1..128, found 129");
  EXPECT_EQ(refusal({"--n", "2", "--mode", "score"}),
            "option --n: expected 1 with --mode score (a score or a perplexity has one answer), found 2");
  EXPECT_EQ(refusal({"--n", "5", "--slots", "4"}), "option --n: expected at most --slots (4): each sample holds a KV slot, found 5");
  EXPECT_EQ(refusal({"--n-prefill", "twice"}), "option --n-prefill: expected once or each, found 'twice'");
}

TEST(Options, PrefixSharingIsOnOrOffFromTheCommandLineOrTheConfigFile) {
  EXPECT_TRUE(parse({}).prefix_sharing);
  EXPECT_FALSE(parse({"--prefix-sharing", "off"}).prefix_sharing);
  EXPECT_FALSE(parse({"--config", config_file("prefix.ini", "prefix-sharing = off\n")}).prefix_sharing);
  EXPECT_EQ(refusal({"--prefix-sharing", "yes"}), "option --prefix-sharing: expected on or off, found 'yes'");
}

TEST(Options, SpeculateIsOffLookupOrADraftModelWithABoundedDraftLength) {
  EXPECT_EQ(parse({}).speculate, Speculation::Off);
  EXPECT_EQ(parse({}).draft_max, 4);
  const auto o = parse({"--speculate", "lookup", "--draft-max", "7"});
  EXPECT_EQ(o.speculate, Speculation::Lookup);
  EXPECT_EQ(o.draft_max, 7);
  const auto ini = parse({"--config", config_file("speculate.ini", "speculate = lookup\ndraft-max = 2\n")});
  EXPECT_EQ(ini.speculate, Speculation::Lookup);
  EXPECT_EQ(ini.draft_max, 2);
  EXPECT_EQ(refusal({"--speculate", "ngram"}), "option --speculate: expected off, lookup or draft:PATH, found 'ngram'");
  const auto draft = parse({"--speculate", "draft:models/small.gguf", "--draft-max", "3"});
  EXPECT_EQ(draft.speculate, Speculation::DraftModel);
  EXPECT_EQ(glacier::app::draft_model_path(draft), "models/small.gguf");
  EXPECT_EQ(glacier::app::speculate_word(draft), "draft:models/small.gguf");
  EXPECT_EQ(draft.draft_max, 3);
  EXPECT_EQ(glacier::app::draft_model_path(o), "");
  EXPECT_EQ(refusal({"--speculate", "draft:"}),
            "option --speculate: expected draft:PATH with the draft model's file, found 'draft:'");
  EXPECT_EQ(refusal({"--speculate", "draft:small.gguf", "--mode", "score"}),
            "option --speculate: expected off with --mode score (only generated tokens are drafted), found "
            "'draft:small.gguf'");
  EXPECT_EQ(refusal({"--speculate", "lookup", "--mode", "score"}),
            "option --speculate: expected off with --mode score (only generated tokens are drafted), found 'lookup'");
  EXPECT_EQ(refusal({"--draft-max", "3"}),
            "option --draft-max: expected --speculate lookup or draft:PATH with it, found --speculate off");
  EXPECT_EQ(refusal({"--speculate", "lookup", "--draft-max", "0"}), "option --draft-max: expected a count in 1..64, found 0");
  EXPECT_EQ(refusal({"--speculate", "lookup", "--draft-max", "65"}), "option --draft-max: expected a count in 1..64, found 65");
}

// The worded options are parsed once into values; each word reads back as given (the provenance records
// the words), and a word outside the list is refused naming the option, the words it takes and the one found.
TEST(Options, WordedOptionsBecomeValuesAndReadBackAsTheirWords) {
  const JobOptions d = parse({});
  EXPECT_EQ(d.mode, JobMode::Generate);
  EXPECT_EQ(d.bind, glacier::sys::Binding::Core);
  EXPECT_EQ(d.wire, glacier::pipeline::WireCodec::F32);
  EXPECT_EQ(d.log_level, glacier::log::Level::Info);
  const JobOptions o = parse({"--mode", "score", "--bind", "numa", "--wire", "int8", "--log-level", "warn",
                              "--partition", "memory", "--n-prefill", "each", "--prefix-sharing", "off"});
  EXPECT_EQ(o.mode, JobMode::Score);
  EXPECT_EQ(o.bind, glacier::sys::Binding::Numa);
  EXPECT_EQ(o.wire, glacier::pipeline::WireCodec::Int8);
  EXPECT_EQ(o.log_level, glacier::log::Level::Warn);
  EXPECT_STREQ(glacier::app::option_word(o.mode), "score");
  EXPECT_STREQ(glacier::app::option_word(o.bind), "numa");
  EXPECT_STREQ(glacier::app::option_word(o.wire), "int8");
  EXPECT_STREQ(glacier::app::option_word(o.log_level), "warn");
  EXPECT_STREQ(glacier::app::option_word(o.partition), "memory");
  EXPECT_STREQ(glacier::app::n_prefill_word(o.share_prefill), "each");
  EXPECT_STREQ(glacier::app::prefix_sharing_word(o.prefix_sharing), "off");
  EXPECT_EQ(glacier::app::speculate_word(o), "off");
  EXPECT_EQ(parse({"--mode", "perplexity", "--ctx", "64"}).mode, JobMode::Perplexity);
  EXPECT_EQ(parse({"--bind", "none"}).bind, glacier::sys::Binding::None);
  EXPECT_EQ(parse({"--wire", "bf16"}).wire, glacier::pipeline::WireCodec::BF16);
  EXPECT_EQ(parse({"--config", config_file("words.ini", "wire = f16\nmode = score\n")}).wire,
            glacier::pipeline::WireCodec::F16);

  EXPECT_EQ(refusal({"--mode", "chat"}), "option --mode: expected generate, score or perplexity, found 'chat'");
  EXPECT_EQ(refusal({"--bind", "socket"}), "option --bind: expected core, numa or none, found 'socket'");
  EXPECT_EQ(refusal({"--wire", "fp8"}), "option --wire: expected f32, f16, bf16 or int8, found 'fp8'");
  EXPECT_EQ(refusal({"--log-level", "verbose"}), "option --log-level: expected debug, info, warn or error, found 'verbose'");
  // Words are exact: no case folding.
  EXPECT_EQ(refusal({"--wire", "F32"}), "option --wire: expected f32, f16, bf16 or int8, found 'F32'");

  // --chat-template names a format (case-insensitive, with its aliases) or is absent (the model's own).
  EXPECT_FALSE(d.chat_template.has_value());
  EXPECT_EQ(parse({"--chat-template", "Qwen"}).chat_template, glacier::model::ChatTemplate::ChatML);
  EXPECT_EQ(parse({"--chat-template", "granite"}).chat_template, glacier::model::ChatTemplate::Granite);
  EXPECT_EQ(refusal({"--chat-template", "vicuna"}),
            std::string("option --chat-template: expected one of ") + glacier::model::chat_template_names() + ", found 'vicuna'");
}

// Of several bad options the first one checked is reported, as when the words were compared as text:
// a missing --model before a bad --mode, a bad --mode before a bad --wire.
TEST(Options, TheFirstBadOptionIsReportedWhateverItsKind) {
  std::vector<const char*> argv = {"glacier_mpi", "--prompts", "p.txt", "--jsonl", "r.jsonl", "--mode", "chat"};
  try {
    glacier::app::parse_options(static_cast<int>(argv.size()), argv.data());
    FAIL() << "a job without --model was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "option --model: expected a GGUF file, found nothing (the option is required)");
  }
  EXPECT_EQ(refusal({"--wire", "fp8", "--mode", "chat"}),
            "option --mode: expected generate, score or perplexity, found 'chat'");
  EXPECT_EQ(refusal({"--log-level", "loud", "--bind", "socket"}), "option --bind: expected core, numa or none, found 'socket'");
}
