// ResultSink: HDF5 and JSONL outputs that agree, the flush policy seen from another process, resume
// (finished indices, rows of changed prompts dropped, refusal of a different model or setting, a JSONL
// equal to an uninterrupted run's), OpenAI batch output lines, output path checks, write errors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "app/prompt_sampling.h"
#include "app/result_sink.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "util/error.h"

namespace glacier::app {
namespace {

using nlohmann::json;

constexpr double kNeverBySeconds = 1e9;  // flush_seconds that never fires within a test

// A user may read a running job's file (h5py on the login node); HDF5 1.10's advisory lock would refuse
// that, and the library reads this variable once, when it starts: hence before main().
const bool kNoHdf5FileLocking = [] { return ::setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1) == 0; }();

// prefix + n, built so that g++ 12 does not warn (-Wrestrict false positive on "literal" + string&&).
std::string numbered(const char* prefix, int64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// Prompt i: plain text, except that with `openai` every third is an OpenAI completion request and
// every third after that an OpenAI chat request.
std::vector<io::PromptRecord> make_records(int n, bool openai = false) {
  std::vector<io::PromptRecord> records(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    io::PromptRecord& r = records[static_cast<size_t>(i)];
    r.index = i;
    r.line = i + 1;
    r.id = numbered("p", i);
    r.prompt = numbered("prompt ", i);
    r.source_line = *r.prompt;
    if (openai && i % 3 != 0) {
      r.format = io::PromptFormat::OpenAiBatch;
      r.custom_id = numbered("req-", i);
      r.id = *r.custom_id;
      if (i % 3 == 2) {
        r.prompt.reset();
        r.messages_json = R"([{"role":"user","content":"hi"}])";
      }
    }
  }
  return records;
}

// A varied result for record i: an error every fifth, a score every fourth.
io::ResultRecord make_result(const io::PromptRecord& record) {
  const auto i = static_cast<int>(record.index);
  io::ResultRecord r;
  r.id = record.id;
  r.index = record.index;
  if (i % 5 == 4) {
    r.status = "error";
    r.error = numbered("prompts.jsonl: line ", i + 1) + ": too long";
    r.finish_reason = "error";
    return r;
  }
  r.prompt_tokens = {1, 100 + i, 200 + i};
  for (int k = 0; k < 1 + i % 4; ++k) {
    r.tokens.push_back(300 + i + k);
    r.logprobs.push_back(-0.25f * static_cast<float>(k + 1) - 0.001f * static_cast<float>(i));
  }
  r.text = numbered("out ", i);
  r.finish_reason = i % 2 ? "length" : "stop";
  r.time_to_first_token_s = 0.01 * i;
  r.total_time_s = 0.1 * i;
  r.score = i % 4 == 1;
  r.sum_logprob = r.score ? -1.5 * i : 0;
  r.greedy = r.score && i % 8 == 1;
  return r;
}

JobOptions make_options(const std::string& dir, int flush_every = 4) {
  JobOptions o;
  o.prompts = dir + "/prompts.jsonl";
  o.h5_out = dir + "/out.h5";
  o.jsonl_out = dir + "/out.jsonl";
  o.flush_every = flush_every;
  o.flush_seconds = kNeverBySeconds;
  return o;
}

Provenance make_provenance(const JobOptions& o) {
  Provenance p;
  p.model_path = "/models/tiny.gguf";
  p.model_bytes = 5000000000ull;  // beyond 32 bits
  p.model_sha256 = std::string(64, 'a');
  p.tensor_types = "f32:11,q8_0:32";
  p.layer_split = "0:3,3:5";
  p.ranks = 2;
  p.hosts = "node1,node2";
  p.options = options_json(o).dump();
  p.settings = result_settings(o, 2048, std::nullopt, p.layer_split).dump();
  p.version = "0.1.0";
  p.commit = "0123abc";
  p.mode = glacier::app::option_word(o.mode);
  p.command_line = "glacier_mpi --model /models/tiny.gguf";
  p.started_at = "2026-12-03T10:00:00Z";
  p.prompts_sha256 = std::string(64, 'c');
  p.batch_job = R"({"job_id":"77","system":"slurm"})";
  p.kernels = "avx2";
  return p;
}

// A shuffled put order: results arrive out of input order in a pipelined job.
std::vector<int> arrival_order(int n) {
  std::vector<int> order;
  for (int k = 0; k < n; ++k) order.push_back((k * 7 + 3) % n);  // a permutation when gcd(7, n) == 1
  return order;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> lines;
  std::istringstream in(glacier::testing::read_text(path));
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// Runs `body` in a child process that ends with _exit (no destructors: like a killed job unless the
// body finishes itself). Returns the exit code; 100 means the body threw.
int run_in_child(const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    int code = 0;
    try {
      body();
    } catch (...) {
      code = 100;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

std::set<int64_t> indices_of(const std::vector<io::ResultRecord>& rows) {
  std::set<int64_t> out;
  for (const auto& r : rows) out.insert(r.index);
  return out;
}

std::string attribute_text(const io::FinishedResults& f, const std::string& name) {
  auto it = f.attributes.find(name);
  return it == f.attributes.end() ? "(absent)" : std::get<std::string>(it->second);
}

int64_t attribute_int(const io::FinishedResults& f, const std::string& name) {
  auto it = f.attributes.find(name);
  return it == f.attributes.end() ? -1 : std::get<int64_t>(it->second);
}

TEST(AppResultSink, Hdf5AndJsonlAgree) {
  const std::string dir = glacier::testing::scratch_dir("sink_agree");
  constexpr int kPrompts = 20;
  const auto records = make_records(kPrompts);
  const JobOptions o = make_options(dir);
  {
    ResultSink sink(o, make_provenance(o), records);
    for (int i : arrival_order(kPrompts)) sink.put(make_result(records[static_cast<size_t>(i)]));
    EXPECT_EQ(sink.done(), kPrompts);
    sink.finish();
  }
  const io::FinishedResults h5 = io::read_finished(o.h5_out);
  ASSERT_EQ(h5.rows.size(), static_cast<size_t>(kPrompts));
  EXPECT_EQ(indices_of(h5.rows).size(), static_cast<size_t>(kPrompts));
  const std::vector<json> lines = read_jsonl(o.jsonl_out);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kPrompts));
  for (const io::ResultRecord& row : h5.rows) {
    const io::ResultRecord expected = make_result(records[static_cast<size_t>(row.index)]);
    EXPECT_EQ(row.id, expected.id);
    EXPECT_EQ(row.tokens, expected.tokens);
    EXPECT_EQ(row.logprobs, expected.logprobs);
    EXPECT_EQ(row.score, expected.score);
    const json& line = lines[static_cast<size_t>(row.index)];  // the JSONL is in input order
    EXPECT_EQ(line["id"], row.id);
    EXPECT_EQ(line["status"], row.status);
    EXPECT_EQ(line["tokens"].get<std::vector<int32_t>>(), row.tokens);
    EXPECT_EQ(line["prompt_tokens"].get<std::vector<int32_t>>(), row.prompt_tokens);
    EXPECT_EQ(line["text"], row.text);
    EXPECT_EQ(line["finish_reason"], row.finish_reason);
    ASSERT_EQ(line["logprobs"].size(), row.logprobs.size());
    for (size_t k = 0; k < row.logprobs.size(); ++k)
      EXPECT_EQ(line["logprobs"][k].get<float>(), row.logprobs[k]);  // shortest float32 form reads back exactly
    if (row.status == "error") {
      EXPECT_EQ(line["error"], row.error);
    }
    EXPECT_EQ(line.contains("sum_logprob"), row.score);
  }
  const Provenance p = make_provenance(o);
  EXPECT_EQ(attribute_text(h5, "model_path"), p.model_path);
  EXPECT_EQ(attribute_int(h5, "model_bytes"), 5000000000ll);
  EXPECT_EQ(attribute_text(h5, "model_sha256"), p.model_sha256);
  EXPECT_EQ(attribute_text(h5, "tensor_types"), p.tensor_types);
  EXPECT_EQ(attribute_text(h5, "layer_split"), p.layer_split);
  EXPECT_EQ(attribute_int(h5, "ranks"), 2);
  EXPECT_EQ(attribute_text(h5, "hosts"), p.hosts);
  EXPECT_EQ(json::parse(attribute_text(h5, "options")), options_json(o));
  EXPECT_EQ(json::parse(attribute_text(h5, "result_settings")), json::parse(p.settings));
  EXPECT_EQ(attribute_text(h5, "glacier_version"), p.version);
  EXPECT_EQ(attribute_text(h5, "glacier_commit"), p.commit);
  EXPECT_EQ(attribute_text(h5, "command_line"), p.command_line);
  EXPECT_EQ(attribute_text(h5, "started_at"), p.started_at);
  EXPECT_FALSE(attribute_text(h5, "finished_at").empty());
  EXPECT_EQ(attribute_text(h5, "prompts_sha256"), p.prompts_sha256);
  EXPECT_EQ(json::parse(attribute_text(h5, "batch_job"))["job_id"], "77");
  EXPECT_EQ(attribute_text(h5, "kernels"), "avx2");
  const json runs = json::parse(attribute_text(h5, "runs"));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["command_line"], p.command_line);
  EXPECT_TRUE(runs[0].contains("finished_at"));
  // Every row says what it answered: the prompt's digest and the sampling it ran with.
  for (const auto& row : h5.rows) {
    const auto& record = records[static_cast<size_t>(row.index)];
    EXPECT_EQ(row.prompt_digest, prompt_digest(record, o)) << row.id;
    EXPECT_EQ(json::parse(row.sampling), sampling_json(sampling_for(record, o))) << row.id;
  }
  EXPECT_EQ(attribute_text(h5, "mode"), "generate");
  EXPECT_EQ(attribute_text(h5, "prompts_path"), o.prompts);
  EXPECT_EQ(attribute_int(h5, "prompt_count"), kPrompts);
  EXPECT_EQ(attribute_int(h5, "resumes"), 0);
}

TEST(AppResultSink, FlushEveryNResultsIsOnDiskWhileTheJobRuns) {
  const std::string dir = glacier::testing::scratch_dir("sink_flush_n");
  const auto records = make_records(10);
  const JobOptions o = make_options(dir, 4);
  ASSERT_TRUE(kNoHdf5FileLocking);
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  auto signal_other = [](int fd) { (void)!write(fd, "s", 1); };
  auto wait_other = [](int fd) {
    char c;
    (void)!read(fd, &c, 1);
  };
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ResultSink sink(o, make_provenance(o), records);
    for (int i = 0; i < 4; ++i) sink.put(make_result(records[static_cast<size_t>(i)]));
    signal_other(to_parent[1]);
    wait_other(to_child[0]);
    for (int i = 4; i < 7; ++i) sink.put(make_result(records[static_cast<size_t>(i)]));
    signal_other(to_parent[1]);
    wait_other(to_child[0]);
    _exit(0);  // killed: no finish(), no destructors
  }
  // Never throws, so the child is always released.
  auto rows_on_disk = [&]() -> int64_t {
    try {
      return static_cast<int64_t>(io::read_finished(o.h5_out).rows.size());
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      return -1;
    }
  };
  wait_other(to_parent[0]);
  EXPECT_EQ(rows_on_disk(), 4) << "flush_every = 4 puts: on disk while the writer runs";
  signal_other(to_child[1]);
  wait_other(to_parent[0]);
  EXPECT_EQ(rows_on_disk(), 4) << "3 more puts: still buffered";
  signal_other(to_child[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(indices_of(io::read_finished(o.h5_out).rows), (std::set<int64_t>{0, 1, 2, 3}));
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);
}

TEST(AppResultSink, FlushAfterSecondsAndTick) {
  const std::string dir = glacier::testing::scratch_dir("sink_flush_s");
  const auto records = make_records(10);
  JobOptions o = make_options(dir, 1000);
  // Margins: each "immediately" step below has this long before it would flush by time.
  o.flush_seconds = 0.5;
  const auto past_flush_time = std::chrono::milliseconds(650);
  const int code = run_in_child([&] {
    ResultSink sink(o, make_provenance(o), records);
    sink.put(make_result(records[0]));  // too soon: buffered
    std::this_thread::sleep_for(past_flush_time);
    sink.put(make_result(records[1]));  // flushes 0 and 1
    sink.put(make_result(records[2]));  // buffered
    std::this_thread::sleep_for(past_flush_time);
    sink.tick();                        // flushes 2 without a new result
    sink.put(make_result(records[3]));  // buffered, lost when killed
    sink.tick();                        // too soon
    _exit(0);
  });
  ASSERT_EQ(code, 0);
  EXPECT_EQ(indices_of(io::read_finished(o.h5_out).rows), (std::set<int64_t>{0, 1, 2}));
}

TEST(AppResultSink, ResumeReturnsTheFinishedIndices) {
  const std::string dir = glacier::testing::scratch_dir("sink_resume");
  auto records = make_records(10);
  JobOptions o = make_options(dir, 3);
  const int code = run_in_child([&] {
    ResultSink sink(o, make_provenance(o), records);
    for (int i : {3, 0, 7, 1, 9, 4}) sink.put(make_result(records[static_cast<size_t>(i)]));  // 4 is an error row
    sink.put(make_result(records[2]));  // not flushed when the job dies
    _exit(0);
  });
  ASSERT_EQ(code, 0);
  records[7].id = "edited";  // the prompt file changed at line 8: that row no longer counts
  o.resume = true;
  ResultSink::check_outputs(o);
  ResultSink sink(o, make_provenance(o), records);
  const std::vector<bool> finished = sink.resume();
  const std::vector<bool> expected = {true, true, false, true, true, false, false, false, false, true};
  EXPECT_EQ(finished, expected);
  EXPECT_EQ(sink.done(), 5);
  for (size_t i = 0; i < finished.size(); ++i)
    if (!finished[i]) sink.put(make_result(records[i]));
  EXPECT_EQ(sink.done(), 10);
  sink.finish();
  const io::FinishedResults h5 = io::read_finished(o.h5_out);
  EXPECT_EQ(attribute_int(h5, "resumes"), 1);
  EXPECT_EQ(h5.rows.size(), 10u) << "5 rows kept from the first run (the stale one dropped) and 5 new";
  std::set<int64_t> indices;
  for (const auto& row : h5.rows) EXPECT_TRUE(indices.insert(row.index).second) << "two rows for index " << row.index;
}

TEST(AppResultSink, ResumeRunsAgainEveryPromptWhoseLineOrSamplingChanged) {
  const std::string dir = glacier::testing::scratch_dir("sink_resume_changed");
  auto records = make_records(6);
  JobOptions o = make_options(dir, 1);
  {
    ResultSink sink(o, make_provenance(o), records);
    for (const auto& r : records) sink.put(make_result(r));
    sink.finish();
  }
  // Same ids and indices, but: prompt 1's text changed, prompt 2 asks for another temperature, prompt
  // 3 has a new seed; prompt 4 (an error row) and the others are as they were.
  records[1].prompt = "another question";
  records[1].source_line = *records[1].prompt;
  records[2].temperature = 0.7;
  records[3].seed = 99;
  o.resume = true;
  ResultSink sink(o, make_provenance(o), records);
  const std::vector<bool> finished = sink.resume();
  EXPECT_EQ(finished, (std::vector<bool>{true, false, false, false, true, true}));
  for (size_t i = 0; i < finished.size(); ++i)
    if (!finished[i]) sink.put(make_result(records[i]));
  sink.finish();
  const io::FinishedResults h5 = io::read_finished(o.h5_out);
  ASSERT_EQ(h5.rows.size(), records.size());
  std::set<int64_t> indices;
  for (const auto& row : h5.rows) {
    EXPECT_TRUE(indices.insert(row.index).second) << "two rows for index " << row.index;
    EXPECT_EQ(row.prompt_digest, prompt_digest(records[static_cast<size_t>(row.index)], o)) << row.id;
  }
  EXPECT_EQ(json::parse(attribute_text(h5, "runs")).size(), 2u);
}

TEST(AppResultSink, PromptDigestCoversTheLineTheIdAndTheSampling) {
  const auto records = make_records(2);
  const JobOptions o = make_options("/tmp");
  const std::string base = prompt_digest(records[0], o);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(prompt_digest(records[0], o), base) << "a digest must be a pure function of its input";
  auto changed = [&](auto edit) {
    io::PromptRecord r = records[0];
    JobOptions opt = o;
    edit(r, opt);
    return prompt_digest(r, opt);
  };
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.source_line += " "; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.id = "other"; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.max_tokens = 3; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.seed = 5; }), base) << "a default it runs with";
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.stop = {"x"}; }), base);
  // Every sampling control, as a prompt field and as an option default.
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.repetition_penalty = 1.1; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.repetition_penalty = 1.1f; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.presence_penalty = 0.5; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.presence_penalty = 0.5f; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.frequency_penalty = -0.5; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.frequency_penalty = -0.5f; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.min_tokens = 1; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.min_tokens = 1; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.ignore_eos = true; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.ignore_eos = true; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.stop_token_ids = std::vector<int32_t>{13}; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.stop_token_ids = {13}; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) {
              r.logit_bias = std::vector<std::pair<int32_t, double>>{{13, 1.0}};
            }),
            base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.logit_bias = {{13, 1.0f}}; }), base);
  EXPECT_NE(changed([](io::PromptRecord& r, JobOptions&) { r.include_stop_str_in_output = true; }), base);
  EXPECT_NE(changed([](io::PromptRecord&, JobOptions& opt) { opt.include_stop_str_in_output = true; }), base);
  const json s = sampling_json(sampling_for(records[0], o));
  for (const char* key : {"repetition_penalty", "presence_penalty", "frequency_penalty", "min_tokens", "ignore_eos",
                          "stop_token_ids", "logit_bias", "include_stop_str_in_output"})
    EXPECT_TRUE(s.contains(key)) << key;
  // A field the prompt sets itself makes the option's default irrelevant to it.
  EXPECT_EQ(changed([](io::PromptRecord& r, JobOptions& opt) {
              r.top_k = 7;
              opt.top_k = 3;
            }),
            changed([](io::PromptRecord& r, JobOptions& opt) {
              r.top_k = 7;
              opt.top_k = 9;
            }));
}

TEST(AppResultSink, ResumeRefusesADifferentModelModeOrOptions) {
  const std::string dir = glacier::testing::scratch_dir("sink_refuse");
  const auto records = make_records(6);
  JobOptions o = make_options(dir);
  {
    ResultSink sink(o, make_provenance(o), records);
    for (const auto& r : records) sink.put(make_result(r));
    sink.finish();
  }
  const std::string jsonl_before = glacier::testing::read_text(o.jsonl_out);
  o.resume = true;

  auto expect_refused = [&](const JobOptions& now, const Provenance& p, const std::vector<std::string>& words) {
    ResultSink sink(now, p, records);
    try {
      sink.resume();
      ADD_FAILURE() << "resume accepted a mismatch";
    } catch (const InputError& e) {
      for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in: " << e.what();
    }
  };
  Provenance other_model = make_provenance(o);
  other_model.model_sha256 = std::string(64, 'b');
  expect_refused(o, other_model, {"SHA-256", std::string(64, 'a'), std::string(64, 'b'), o.h5_out});

  JobOptions hotter = o;
  hotter.temperature = 0.5f;
  expect_refused(hotter, make_provenance(hotter), {"temperature: 0.0 in the file, 0.5 now"});

  JobOptions scoring = o;
  scoring.mode = glacier::app::JobMode::Score;
  expect_refused(scoring, make_provenance(scoring), {"mode: \"generate\" in the file, \"score\" now"});

  JobOptions lossy = o;
  lossy.wire = glacier::pipeline::WireCodec::Int8;
  expect_refused(lossy, make_provenance(lossy), {"wire: \"f32\" in the file, \"int8\" now", "layer_split"});

  // A refused resume touches neither output.
  EXPECT_EQ(glacier::testing::read_text(o.jsonl_out), jsonl_before);
  const io::FinishedResults h5 = io::read_finished(o.h5_out);
  EXPECT_EQ(h5.rows.size(), records.size());
  EXPECT_EQ(attribute_int(h5, "resumes"), 0);
}

TEST(AppResultSink, ResumedJsonlEqualsAnUninterruptedRun) {
  constexpr int kPrompts = 19;
  const auto records = make_records(kPrompts, true);
  const auto order = arrival_order(kPrompts);

  const std::string dir_a = glacier::testing::scratch_dir("sink_whole");
  const JobOptions a = make_options(dir_a, 3);
  {
    ResultSink sink(a, make_provenance(a), records);
    for (int i : order) sink.put(make_result(records[static_cast<size_t>(i)]));
    sink.finish();
  }

  const std::string dir_b = glacier::testing::scratch_dir("sink_resumed");
  JobOptions b = make_options(dir_b, 3);
  const int code = run_in_child([&] {
    ResultSink sink(b, make_provenance(b), records);
    for (int k = 0; k < 7; ++k) sink.put(make_result(records[static_cast<size_t>(order[static_cast<size_t>(k)])]));
    _exit(0);  // 6 rows flushed, the 7th lost
  });
  ASSERT_EQ(code, 0);
  b.resume = true;
  ResultSink sink(b, make_provenance(b), records);
  const std::vector<bool> finished = sink.resume();
  EXPECT_EQ(std::count(finished.begin(), finished.end(), true), 6);
  for (int i : order)
    if (!finished[static_cast<size_t>(i)]) sink.put(make_result(records[static_cast<size_t>(i)]));
  sink.finish();

  EXPECT_EQ(glacier::testing::read_text(b.jsonl_out), glacier::testing::read_text(a.jsonl_out));
  const auto rows = io::read_finished(b.h5_out).rows;
  EXPECT_EQ(rows.size(), static_cast<size_t>(kPrompts)) << "every prompt exactly once";
  EXPECT_EQ(indices_of(rows).size(), static_cast<size_t>(kPrompts));
}

TEST(AppResultSink, OpenAiBatchInputGetsOpenAiBatchOutput) {
  const std::string dir = glacier::testing::scratch_dir("sink_openai");
  const auto records = make_records(15, true);
  JobOptions o = make_options(dir);
  o.h5_out.clear();  // JSONL only
  {
    ResultSink sink(o, make_provenance(o), records);
    for (const auto& r : records) sink.put(make_result(r));
    sink.finish();
  }
  const auto lines = read_jsonl(o.jsonl_out);
  ASSERT_EQ(lines.size(), records.size());
  int completions = 0, chats = 0, errors = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const json& line = lines[i];
    const io::ResultRecord result = make_result(records[i]);
    if (records[i].format != io::PromptFormat::OpenAiBatch) {
      EXPECT_EQ(line["id"], records[i].id);  // glacier's own format
      EXPECT_TRUE(line.contains("status"));
      continue;
    }
    EXPECT_EQ(line["id"], numbered("batch_req_", i + 1));
    EXPECT_EQ(line["custom_id"], *records[i].custom_id);
    if (result.status == "error") {
      ++errors;
      EXPECT_EQ(line["response"]["status_code"], 400);
      EXPECT_EQ(line["response"]["body"]["error"]["message"], result.error);
      EXPECT_EQ(line["error"]["message"], result.error);
      continue;
    }
    EXPECT_EQ(line["response"]["status_code"], 200);
    const json& body = line["response"]["body"];
    const json& choice = body["choices"][0];
    EXPECT_EQ(body["usage"]["completion_tokens"], result.tokens.size());
    if (records[i].is_chat()) {
      ++chats;
      EXPECT_EQ(body["object"], "chat.completion");
      EXPECT_EQ(choice["message"]["content"], result.text);
    } else {
      ++completions;
      EXPECT_EQ(body["object"], "text_completion");
      EXPECT_EQ(choice["text"], result.text);
    }
  }
  EXPECT_GT(completions, 0);
  EXPECT_GT(chats, 0);
  EXPECT_GT(errors, 0);
}

void expect_input_error(const JobOptions& o, const std::vector<std::string>& words) {
  try {
    ResultSink::check_outputs(o);
    ADD_FAILURE() << "check_outputs accepted it";
  } catch (const InputError& e) {
    for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in: " << e.what();
  }
}

TEST(AppResultSink, CheckOutputsBeforeTheModelIsLoaded) {
  const std::string dir = glacier::testing::scratch_dir("sink_check");
  JobOptions ok = make_options(dir);
  EXPECT_NO_THROW(ResultSink::check_outputs(ok));

  JobOptions bad_jsonl = ok;
  bad_jsonl.jsonl_out = dir + "/missing/out.jsonl";
  expect_input_error(bad_jsonl, {"--jsonl", bad_jsonl.jsonl_out});
  JobOptions bad_out = ok;
  bad_out.h5_out = dir;  // a directory
  expect_input_error(bad_out, {"--out", dir});
  JobOptions same = ok;
  same.jsonl_out = dir + "/./out.h5";
  expect_input_error(same, {"--out", "--jsonl", "different"});
  // No output may name an input: the same path, a symlink or a hard link to it.
  {
    std::ofstream(dir + "/model.gguf") << "GGUF";
    std::ofstream(ok.prompts) << "{\"prompt\": \"x\"}\n";
  }
  JobOptions over_model = ok;
  over_model.model = dir + "/model.gguf";
  over_model.h5_out = over_model.model;
  expect_input_error(over_model, {"--out", "--model", "destroy"});
  JobOptions over_prompts = ok;
  over_prompts.jsonl_out = dir + "/../" + std::filesystem::path(dir).filename().string() + "/prompts.jsonl";
  expect_input_error(over_prompts, {"--jsonl", "--prompts"});
  std::filesystem::remove(dir + "/link.jsonl");
  std::filesystem::create_symlink(ok.prompts, dir + "/link.jsonl");
  JobOptions via_symlink = ok;
  via_symlink.jsonl_out = dir + "/link.jsonl";
  expect_input_error(via_symlink, {"--jsonl", "--prompts"});
  std::filesystem::remove(dir + "/hard.h5");
  std::filesystem::create_hard_link(dir + "/model.gguf", dir + "/hard.h5");
  JobOptions via_hard_link = ok;
  via_hard_link.model = dir + "/model.gguf";
  via_hard_link.h5_out = dir + "/hard.h5";
  expect_input_error(via_hard_link, {"--out", "--model"});
  JobOptions over_config = ok;
  over_config.config_file = dir + "/job.ini";
  over_config.h5_out = over_config.config_file;
  expect_input_error(over_config, {"--out", "--config"});
  JobOptions over_partition_from = ok;
  over_partition_from.partition_from = ok.h5_out;
  expect_input_error(over_partition_from, {"--out", "--partition-from"});

  JobOptions resume = ok;
  resume.resume = true;
  expect_input_error(resume, {"--resume", resume.h5_out});  // no such file yet
  {
    std::ofstream text(resume.h5_out);
    text << "not hdf5\n";
  }
  expect_input_error(resume, {"--resume", resume.h5_out});
  resume.h5_out.clear();
  expect_input_error(resume, {"--resume", "--out"});

  JobOptions real = ok;
  {
    ResultSink sink(real, make_provenance(real), make_records(2));
    sink.finish();
  }
  real.resume = true;
  EXPECT_NO_THROW(ResultSink::check_outputs(real));
}

TEST(AppResultSink, JsonlWriteErrorNamesThePath) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "needs a writable /dev/full";
  const std::string dir = glacier::testing::scratch_dir("sink_full_jsonl");
  const auto records = make_records(2000);
  JobOptions o = make_options(dir);
  o.h5_out.clear();
  o.jsonl_out = "/dev/full";  // every write fails with ENOSPC
  ResultSink sink(o, make_provenance(o), records);
  try {
    for (const auto& r : records) sink.put(make_result(r));
    sink.finish();
    FAIL() << "writing to /dev/full succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
}

TEST(AppResultSink, FullDiskIsRefusedBeforeWritingAndFlushedRowsStayReadable) {
  const std::string dir = glacier::testing::scratch_dir("sink_full_h5");
  const auto records = make_records(20);
  JobOptions o = make_options(dir, 4);
  o.jsonl_out.clear();
  constexpr int kFlushedRows = 8;
  uint64_t free_bytes = uint64_t{1} << 40;
  {
    ResultSink sink(o, make_provenance(o), records);
    sink.set_free_space_probe([&](const std::string&) { return std::optional<uint64_t>(free_bytes); });
    for (int i = 0; i < kFlushedRows; ++i) sink.put(make_result(records[static_cast<size_t>(i)]));
    free_bytes = ResultSink::kSpaceMargin - 1;  // the disk fills up
    for (int i = kFlushedRows; i < kFlushedRows + 3; ++i) sink.put(make_result(records[static_cast<size_t>(i)]));
    try {
      sink.put(make_result(records[kFlushedRows + 3]));  // the 4th: a flush
      FAIL() << "a flush onto a full disk succeeded";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(o.h5_out), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
    }
    EXPECT_THROW(sink.put(make_result(records[kFlushedRows + 4])), std::runtime_error) << "the error sticks";
    EXPECT_THROW(sink.finish(), std::runtime_error);
  }  // the job unwinds: closing the file must not add the refused rows
  const io::FinishedResults h5 = io::read_finished(o.h5_out);
  ASSERT_EQ(h5.rows.size(), static_cast<size_t>(kFlushedRows));
  for (int i = 0; i < kFlushedRows; ++i) {
    const io::ResultRecord expected = make_result(records[static_cast<size_t>(i)]);
    EXPECT_EQ(h5.rows[static_cast<size_t>(i)].id, expected.id);
    EXPECT_EQ(h5.rows[static_cast<size_t>(i)].text, expected.text);
  }
}

TEST(AppResultSink, Hdf5WriteErrorNamesThePath) {
  const std::string dir = glacier::testing::scratch_dir("sink_efbig");
  const auto records = make_records(200);
  JobOptions o = make_options(dir, 4);
  o.jsonl_out.clear();
  const int code = run_in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);  // over the limit, write() fails with EFBIG instead of killing
    ResultSink sink(o, make_provenance(o), records);
    for (int i = 0; i < 8; ++i) sink.put(make_result(records[static_cast<size_t>(i)]));
    struct stat st;
    if (stat(o.h5_out.c_str(), &st) != 0) _exit(10);
    // A file that cannot grow, which the free-space check cannot see (like a quota).
    const rlimit limit{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(11);
    try {
      for (size_t i = 8; i < records.size(); ++i) {
        io::ResultRecord r = make_result(records[i]);
        r.text.assign(64 * 1024, 'x');  // forces the file to grow
        sink.put(r);
      }
      sink.finish();
    } catch (const std::runtime_error& e) {
      _exit(std::string(e.what()).find(o.h5_out) != std::string::npos ? 0 : 12);
    }
    _exit(13);
  });
  EXPECT_EQ(code, 0) << "10/11: setup failed, 12: the message lacks the path, 13: no error, 100: other exception";
}

}  // namespace
}  // namespace glacier::app
