// drive_perplexity: chunks from plan_perplexity through the scheduler, folded in order by the accumulator.
#include "app/perplexity_driver.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/job.h"
#include "app/perplexity.h"
#include "app/result_sink.h"
#include "io/hdf5_perplexity.h"
#include "util/error.h"

namespace glacier::app {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the text file for reading");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int drive_perplexity(const JobOptions& o, const model::Tokenizer& tok, pipeline::Ring& ring,
                     const pipeline::SchedulerOptions& sopt, const Provenance& provenance) {
  // --out gets a new file (never an earlier run's, which would then hold this run's trace beside its
  // own results) with the provenance now and the figures at the end; the JSONL is written below.
  JobOptions h5_only = o;
  h5_only.jsonl_out.clear();
  const std::vector<io::PromptRecord> no_prompts;
  std::optional<ResultSink> sink;
  if (!o.h5_out.empty()) sink.emplace(h5_only, provenance, no_prompts);
  const std::vector<int32_t> tokens = tok.encode(read_file(o.prompts), true, false);
  PerplexityPlan plan = plan_perplexity(o.prompts, tokens, o.ctx, tok.bos());
  std::vector<std::vector<float>> logprobs(static_cast<size_t>(plan.n_chunk));
  std::vector<bool> finished(static_cast<size_t>(plan.n_chunk), false);
  std::string error;
  // Chunks finish in any order; the running values are printed, as llama-perplexity prints them, for
  // the longest run of finished chunks from the first, so each covers exactly the chunks before it.
  PerplexityAccumulator acc;
  size_t next_to_fold = 0;
  pipeline::Scheduler sched(sopt, ring, nullptr, [&](pipeline::SequenceOutcome&& out) {
    if (out.finish == pipeline::FinishReason::Error) error = out.error;
    const auto c = static_cast<size_t>(out.seq);
    logprobs[c] = std::move(out.target_logprobs);
    finished[c] = true;
    for (; next_to_fold < finished.size() && finished[next_to_fold] && error.empty(); ++next_to_fold) {
      const PerplexityChunk& chunk = acc.add_chunk(logprobs[next_to_fold]);
      std::fputs(format_running_ppl(static_cast<int32_t>(next_to_fold) + 1, chunk.running_ppl).c_str(), stdout);
      std::fflush(stdout);
    }
  });
  for (auto& r : plan.chunks) sched.add(std::move(r));
  sched.run();
  std::fputs("\n", stdout);
  if (!error.empty()) throw InputError(o.prompts + ": perplexity failed: " + error);
  GLACIER_ASSERT(next_to_fold == finished.size(), "perplexity: a chunk never finished");
  const PerplexityResult pr = acc.result();
  const nlohmann::json j = perplexity_json(plan, pr);
  if (!o.jsonl_out.empty()) {
    std::ofstream out(o.jsonl_out);
    out << j.dump() << "\n";
    if (!out) throw InputError(o.jsonl_out + ": write failed");
  }
  if (sink) {
    sink->record_attribute("perplexity", j.dump());
    sink->finish();
    io::write_perplexity(o.h5_out, perplexity_table(plan, pr, logprobs));
  }
  std::fputs(format_chunk_table(pr).c_str(), stdout);
  std::printf("%s\n", format_final_estimate(pr).c_str());
  return kExitOk;
}

}  // namespace glacier::app
