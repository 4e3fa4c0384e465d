// PromptBook: a prompt index to scheduler requests (one prompt, a prompt array's elements, or a line's
// continuations) and finished sequences back to the prompt's result rows.
#include "app/prompt_book.h"

#include <algorithm>

#include "app/prompt_sampling.h"
#include "io/prompt_reader.h"

namespace glacier::app {

PromptBook::PromptBook(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat)
    : o_(o), tok_(tok), chat_(chat), records_(io::read_prompts(o.prompts)), plans_(records_.size()) {}

std::string PromptBook::where(const io::PromptRecord& rec) const {
  return o_.prompts + ":" + std::to_string(rec.line) + ": ";
}

std::vector<io::ResultRecord> PromptBook::add(int32_t i, pipeline::Scheduler& sched) {
  const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
  if (!rec.ok) return {make_error_result(rec, rec.error)};
  if (rec.continuations) return add_continuations(i, sched);
  if (rec.prompt_elements() > 1) return add_prompt_list(i, sched);
  pipeline::SequenceRequest req;
  PromptPlan& plan = plans_[static_cast<size_t>(i)];
  if (auto err = build_request(rec, o_, tok_, chat_, i, req, plan)) {
    std::vector<io::ResultRecord> rows;
    for (int32_t j = 0; j < plan.n_samples; ++j) {
      rows.push_back(make_error_result(rec, where(rec) + *err));
      rows.back().sample = j;
    }
    return rows;
  }
  sched.add(std::move(req));
  return {};
}

bool PromptBook::ends(const pipeline::SequenceOutcome& out) const {
  return ends_generation(tok_, plans_[static_cast<size_t>(out.seq)], out);
}

std::vector<io::ResultRecord> PromptBook::result(const pipeline::SequenceOutcome& out) {
  const PromptPlan& plan = plans_[static_cast<size_t>(out.seq)];
  const auto choices = choice_plans_.find(out.seq);
  io::ResultRecord r = make_result(
      tok_, choices == choice_plans_.end() ? plan : choices->second.at(static_cast<size_t>(out.sample)), out);
  if (r.status == "error") r.error = where(plan.record) + r.error;
  if (plan.n_samples == 1) return {std::move(r)};
  std::vector<io::ResultRecord>& rows = unfinished_[out.seq];
  rows.push_back(std::move(r));
  if (rows.size() < static_cast<size_t>(plan.n_samples)) return {};
  std::vector<io::ResultRecord> done = std::move(rows);
  unfinished_.erase(out.seq);
  choice_plans_.erase(out.seq);
  std::sort(done.begin(), done.end(), [](const io::ResultRecord& a, const io::ResultRecord& b) { return a.sample < b.sample; });
  return done;
}

// A `continuations` line: each continuation is a score sequence of its own (row k of the line, its
// `sample`), planned as the line with that one continuation; they share the context's KV rows through
// the scheduler's prefix sharing. All k run, or the line fails as a whole.
std::vector<io::ResultRecord> PromptBook::add_continuations(int32_t i, pipeline::Scheduler& sched) {
  const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
  const size_t n = rec.continuations->size();
  std::vector<PromptPlan> plans(n);
  std::vector<pipeline::SequenceRequest> reqs(n);
  const auto fail_all = [&](const std::string& message) {
    std::vector<io::ResultRecord> rows;
    for (size_t j = 0; j < n; ++j) {
      rows.push_back(make_error_result(rec, where(rec) + message));
      rows.back().sample = static_cast<int64_t>(j);
    }
    return rows;
  };
  // One row a continuation: samples would multiply them.
  if (const int32_t samples = sampling_for(rec, o_).n; samples != 1)
    return fail_all("n of " + std::to_string(samples) + ": expected 1 for a \"continuations\" line (a score has one answer)");
  for (size_t k = 0; k < n; ++k) {
    io::PromptRecord one = rec;
    one.continuations.reset();
    one.continuation = (*rec.continuations)[k];
    if (auto err = build_request(one, o_, tok_, chat_, i, reqs[k], plans[k])) {
      // Built with += (GCC 12 warns falsely on long operator+ chains of std::string).
      std::string message = "\"continuations[";
      message += std::to_string(k);
      message += "]\": ";
      message += *err;
      return fail_all(message);
    }
    reqs[k].row = static_cast<int32_t>(k);
  }
  PromptPlan& plan = plans_[static_cast<size_t>(i)];
  plan = plans[0];
  plan.record = rec;
  plan.n_samples = static_cast<int32_t>(n);
  choice_plans_[i] = std::move(plans);
  for (pipeline::SequenceRequest& req : reqs) sched.add(std::move(req));
  return {};
}

// An OpenAI completions request with a prompt array: element p is a prompt of its own (the line with
// that one prompt) whose n samples are rows p*n .. p*n+n-1. All elements run, or the line fails whole.
std::vector<io::ResultRecord> PromptBook::add_prompt_list(int32_t i, pipeline::Scheduler& sched) {
  const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
  const size_t m = rec.prompt_elements();
  const int32_t n = sampling_for(rec, o_).n;
  const int32_t rows = result_rows(rec, o_);
  const auto fail_all = [&](const std::string& message) {
    std::vector<io::ResultRecord> out;
    for (int32_t j = 0; j < rows; ++j) {
      out.push_back(make_error_result(rec, where(rec) + message));
      out.back().sample = j;
    }
    return out;
  };
  if (static_cast<int64_t>(m) * n != rows)
    return fail_all("n of " + std::to_string(n) + " (from --n): expected at most " +
                    std::to_string(io::kMaxSamplesPerPrompt / static_cast<int32_t>(m)) + " with a prompt array of " +
                    std::to_string(m) + " prompts (at most " + std::to_string(io::kMaxSamplesPerPrompt) +
                    " choices in one request)");
  std::vector<PromptPlan> plans(static_cast<size_t>(rows));
  std::vector<pipeline::SequenceRequest> reqs(m);
  for (size_t p = 0; p < m; ++p) {
    io::PromptRecord one = rec;
    one.prompt_list.reset();
    one.prompt_token_ids_list.reset();
    if (rec.prompt_list) one.prompt = (*rec.prompt_list)[p];
    else one.prompt_token_ids = (*rec.prompt_token_ids_list)[p];
    PromptPlan plan;
    if (auto err = build_request(one, o_, tok_, chat_, i, reqs[p], plan)) {
      std::string message = "\"body.prompt[";
      message += std::to_string(p);
      message += "]\": ";
      message += *err;
      return fail_all(message);
    }
    reqs[p].row = static_cast<int32_t>(p) * n;
    for (int32_t j = 0; j < n; ++j) plans[p * static_cast<size_t>(n) + static_cast<size_t>(j)] = plan;
  }
  PromptPlan& plan = plans_[static_cast<size_t>(i)];
  plan = plans[0];
  plan.record = rec;
  plan.n_samples = rows;
  choice_plans_[i] = std::move(plans);
  for (pipeline::SequenceRequest& req : reqs) sched.add(std::move(req));
  return {};
}

}  // namespace glacier::app
