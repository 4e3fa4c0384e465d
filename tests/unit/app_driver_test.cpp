// The prompt driver without MPI: 1 to 3 replicas (threads of one stage each, over in-process channels)
// share one prompt queue. Their JSONL must be byte for byte a one-replica run's, each prompt answered
// once in its own row, under injected faults: unreadable and unrunnable prompt lines, a slow link from a
// replica to the coordinator, and a stop request mid-run (drained, then finished by --resume).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <exception>
#include <fstream>
#include <functional>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/driver.h"
#include "app/job.h"
#include "app/provenance.h"
#include "app/requests.h"
#include "app/sha256.h"
#include "app/signals.h"
#include "comm/inprocess_channel.h"
#include "common/job_runner.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "model/tokenizer.h"
#include "pipeline/local_ring.h"
#include "util/stop_request.h"

namespace {

using namespace glacier;

constexpr int32_t kCtx = 128;
constexpr int32_t kSlots = 3;  // fewer than the prompts: every replica comes back for more
constexpr int32_t kUbatch = 32;
constexpr int kPromptLines = 16;
constexpr int kUnreadableLine = 5;   // not JSON: an error row from the prompt reader
constexpr int kUnrunnableLine = 11;  // a token id outside the vocabulary: an error row from the request

std::string model_path() {
  model::SyntheticModelSpec spec = model::synthetic_preset("tiny");
  spec.seed = 7;
  return glacier::testing::synthetic_model_once(spec, "driver-model");
}

// Plain prompts by token ids and by text, sampled ones with two samples each, and the two bad lines.
std::string write_prompts(const std::string& dir) {
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < kPromptLines; ++i) {
    const std::string id = "\"id\": \"p" + std::to_string(i) + "\"";
    const std::string max_tokens = ", \"max_tokens\": " + std::to_string(4 + i % 5);
    if (i == kUnreadableLine) {
      out << "{\"id\": \"broken\", \"prompt\": \n";
    } else if (i == kUnrunnableLine) {
      out << "{" << id << ", \"prompt_token_ids\": [1, 999999]}\n";
    } else if (i % 3 == 1) {
      out << "{" << id << ", \"prompt\": \"once upon a time number " << i << "\", \"n\": 2, \"temperature\": 0.8, "
          << "\"seed\": " << 100 + i << max_tokens << "}\n";
    } else {
      out << "{" << id << ", \"prompt_token_ids\": [1";
      for (int j = 0; j < 3 + 5 * i % 11; ++j) out << ", " << 3 + (29 * i + 13 * j) % 250;
      out << "]" << max_tokens << "}\n";
    }
  }
  return path;
}

app::JobOptions job_options(const std::string& dir, const std::string& name) {
  app::JobOptions o;
  o.model = model_path();
  o.prompts = write_prompts(dir);
  o.jsonl_out = dir + "/" + name + ".jsonl";
  o.h5_out = dir + "/" + name + ".h5";
  o.ctx = kCtx;
  o.flush_every = 2;
  return o;
}

// A ring that asks the job to stop (as SIGTERM would) when it is handed its Nth micro-batch.
class StopAfterSubmits : public pipeline::Ring {
 public:
  StopAfterSubmits(pipeline::Ring& inner, int n) : inner_(inner), left_(n) {}
  int n_stages() const override { return inner_.n_stages(); }
  void submit(const compute::MicroBatch& mb) override {
    if (--left_ == 0) stop::note_local(SIGTERM);
    inner_.submit(mb);
  }
  bool poll(compute::MicroBatchResult& out, bool wait) override { return inner_.poll(out, wait); }

 private:
  pipeline::Ring& inner_;
  int left_;
};

struct Faults {
  double slow_link_s = 0.0;  // held before every send of the replicas k > 0 (to the coordinator)
  int stop_after = 0;        // replica 0's micro-batches before a stop request (0: none)
};

struct Outcome {
  std::vector<int> codes;  // by replica
  std::vector<int64_t> prompt_tokens_computed;  // by replica (its /trace counters)
  app::PromptTally tally;                       // the leader's count of the prompts
};

// Runs the job's prompts on `replicas` drivers, one thread each (world rank k drives replica k).
Outcome run_replicas(const app::JobOptions& o, int replicas, const Faults& faults = {}) {
  auto file = gguf::File::open(o.model);
  const model::ModelConfig cfg = model::read_model_config(*file);
  auto world = comm::make_inprocess_channels(replicas);
  Outcome outcome;
  outcome.codes.assign(static_cast<size_t>(replicas), -1);
  outcome.prompt_tokens_computed.assign(static_cast<size_t>(replicas), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(replicas));
  // The drivers start together once every replica has loaded its model: a replica thread still loading
  // on a busy 2-core machine otherwise missed the whole (10 ms) job, and the test read that as a fault.
  std::latch loaded(replicas);
  std::vector<std::thread> threads;
  for (int k = 0; k < replicas; ++k) {
    threads.emplace_back([&, k] {
      bool arrived = false;
      try {
        comm::Channel& ch = *world[static_cast<size_t>(k)];
        if (k > 0) ch.configure_faults({0.0, faults.slow_link_s});
        ThreadPool pool(1);
        compute::TransformerStage stage(cfg, model::load_shard(*file, cfg, {0, cfg.n_layer}, true, true), kSlots, kCtx,
                                        kUbatch, pool);
        pipeline::LocalRing local(stage, 1);
        StopAfterSubmits stopping(local, faults.stop_after);
        pipeline::Ring& ring = k == 0 && faults.stop_after > 0 ? static_cast<pipeline::Ring&>(stopping) : local;
        const auto tok = model::Tokenizer::from_gguf(*file);
        const app::ChatSetup chat = app::choose_chat_template(o, file->find_string("tokenizer.chat_template"));
        pipeline::SchedulerOptions sopt;
        sopt.n_slots = kSlots;
        sopt.n_ctx = kCtx;
        sopt.ubatch = kUbatch;
        sopt.max_in_flight = 1;
        sopt.decode_groups = 1;
        planning::DecodeGroupPlan groups;
        arrived = true;
        loaded.arrive_and_wait();
        app::Driver driver({o, *tok, chat, ring, sopt, ch, groups});
        if (k > 0) {
          outcome.codes[static_cast<size_t>(k)] = driver.serve(0);
          outcome.prompt_tokens_computed[static_cast<size_t>(k)] = driver.counters().prompt_tokens_computed;
          return;
        }
        std::vector<int> clients;
        for (int c = 1; c < replicas; ++c) clients.push_back(c);
        const app::Provenance provenance = app::describe_run(
            o, *file, {"0:" + std::to_string(cfg.n_layer), replicas, std::vector<std::string>(replicas, "inprocess"),
                       kCtx, chat, "2026-12-04T00:00:00Z", app::sha256_file(o.model), groups.to_json().dump()});
        outcome.codes[0] = driver.lead(provenance, clients);
        outcome.tally = driver.tally();
        outcome.prompt_tokens_computed[0] = driver.counters().prompt_tokens_computed;
      } catch (...) {
        errors[static_cast<size_t>(k)] = std::current_exception();
        if (!arrived) loaded.count_down();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return outcome;
}

// The id the JSONL gives prompt line i (the unreadable line has none: its 1-based line number).
std::string id_of_line(int i) {
  if (i == kUnreadableLine) return std::to_string(i + 1);
  std::string id = "p";  // built with += (GCC 12 warns falsely on operator+ of a literal and a std::string)
  id += std::to_string(i);
  return id;
}

// Every prompt line has exactly its rows, in input order: one a sample, numbered from 0, under its id.
void expect_each_prompt_answered_once(const std::string& jsonl, int lines) {
  const std::vector<nlohmann::json> rows = glacier::testing::read_jsonl(jsonl);
  std::vector<std::string> ids;
  std::set<std::pair<std::string, int>> seen;
  for (const auto& r : rows) {
    const std::string id = r.at("id").get<std::string>();
    const int sample = r.value("sample", 0);
    EXPECT_TRUE(seen.insert({id, sample}).second) << "row " << id << " sample " << sample << " twice";
    if (ids.empty() || ids.back() != id) ids.push_back(id);
  }
  ASSERT_EQ(static_cast<int>(ids.size()), lines) << jsonl;
  for (int i = 0; i < lines; ++i) {
    EXPECT_EQ(ids[static_cast<size_t>(i)], id_of_line(i)) << "line " << i << " of " << jsonl;
  }
  for (const auto& r : rows) {
    const std::string id = r.at("id").get<std::string>();
    const bool bad = id == id_of_line(kUnrunnableLine) || id == id_of_line(kUnreadableLine);
    EXPECT_EQ(r.at("status").get<std::string>(), bad ? "error" : "ok") << r.dump();
  }
}

class DriverReplicas : public ::testing::TestWithParam<int> {};

TEST_P(DriverReplicas, SameRowsAsOneReplicaWithASlowLink) {
  app::clear_stop_request();
  const std::string dir = glacier::testing::scratch_dir("driver-r" + std::to_string(GetParam()));
  const app::JobOptions one = job_options(dir, "one");
  const Outcome alone = run_replicas(one, 1);
  ASSERT_EQ(alone.codes, std::vector<int>{app::kExitOk});
  expect_each_prompt_answered_once(one.jsonl_out, kPromptLines);
  // The two bad lines failed, every other prompt (sampled ones with both rows) finished once.
  EXPECT_EQ(alone.tally.failed, 2);
  EXPECT_EQ(alone.tally.finished_ok, kPromptLines - 2);

  const app::JobOptions many = job_options(dir, "many");
  // A millisecond a message from the serving replicas: they come back later, so the coordinator's own
  // replica takes more prompts than an even deal.
  const Outcome got = run_replicas(many, GetParam(), {0.001, 0});
  EXPECT_EQ(got.codes, std::vector<int>(static_cast<size_t>(GetParam()), app::kExitOk));
  expect_each_prompt_answered_once(many.jsonl_out, kPromptLines);
  // The summary counts each prompt once, wherever it ran and however its rows arrived.
  EXPECT_EQ(got.tally.failed, alone.tally.failed);
  EXPECT_EQ(got.tally.finished_ok, alone.tally.finished_ok);
  EXPECT_EQ(got.tally.prompt_tokens, alone.tally.prompt_tokens);
  EXPECT_EQ(got.tally.generated_tokens, alone.tally.generated_tokens);
  // The one queue fed every replica, the slow one too (a replica holds at most its share of the work).
  for (int k = 0; k < GetParam(); ++k)
    EXPECT_GT(got.prompt_tokens_computed[static_cast<size_t>(k)], 0) << "replica " << k << " ran no prompt";
  EXPECT_EQ(glacier::testing::read_text(many.jsonl_out), glacier::testing::read_text(one.jsonl_out));
}

INSTANTIATE_TEST_SUITE_P(Replicas, DriverReplicas, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "replicas"; });

TEST(DriverDrain, StopMidRunKeepsEveryFinishedRowAndResumeCompletesTheFile) {
  app::clear_stop_request();
  const std::string dir = glacier::testing::scratch_dir("driver-stop");
  const app::JobOptions one = job_options(dir, "one");
  ASSERT_EQ(run_replicas(one, 1).codes, std::vector<int>{app::kExitOk});
  const std::vector<nlohmann::json> reference = glacier::testing::read_jsonl(one.jsonl_out);

  app::JobOptions stopped = job_options(dir, "stopped");
  const Outcome drained = run_replicas(stopped, 2, {0.0, 3});
  app::clear_stop_request();
  // The job's outcome is the coordinator's (a serving replica that found the queue closed first ends 0).
  EXPECT_EQ(drained.codes[0], app::kExitInterrupted);
  // What was saved is a part of the reference, row for row; something was left to do.
  const std::vector<nlohmann::json> partial = glacier::testing::read_jsonl(stopped.jsonl_out);
  EXPECT_LT(partial.size(), reference.size());
  EXPECT_GT(partial.size(), 0u);
  for (const auto& row : partial) EXPECT_NE(std::find(reference.begin(), reference.end(), row), reference.end()) << row.dump();

  stopped.resume = true;
  EXPECT_EQ(run_replicas(stopped, 3).codes, std::vector<int>(3, app::kExitOk));
  expect_each_prompt_answered_once(stopped.jsonl_out, kPromptLines);
  EXPECT_EQ(glacier::testing::read_text(stopped.jsonl_out), glacier::testing::read_text(one.jsonl_out));
}

}  // namespace
