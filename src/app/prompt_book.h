// A replica driver's view of the prompt file: turns prompt indices into scheduler requests and finished
// sequences into result records. Every driver reads the file itself, so only indices travel.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/options.h"
#include "app/requests.h"
#include "io/prompt_record.h"
#include "io/result_record.h"
#include "model/tokenizer.h"
#include "pipeline/scheduler.h"

namespace glacier::app {

class PromptBook {
 public:
  // Reads o.prompts (throws InputError when it cannot); the options, tokenizer and chat set-up must
  // outlive the book.
  PromptBook(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat);
  const std::vector<io::PromptRecord>& records() const { return records_; }

  // Queues prompt i, or returns its error rows (one a sample) when it cannot run.
  std::vector<io::ResultRecord> add(int32_t i, pipeline::Scheduler& sched);
  // True when the sequence's newest token ends it (the scheduler's stop rule).
  bool ends(const pipeline::SequenceOutcome& out) const;
  // A finished sample's row; once every sample of its prompt has finished, the prompt's rows in sample
  // order (empty until then).
  std::vector<io::ResultRecord> result(const pipeline::SequenceOutcome& out);

 private:
  std::string where(const io::PromptRecord& rec) const;
  std::vector<io::ResultRecord> add_continuations(int32_t i, pipeline::Scheduler& sched);
  std::vector<io::ResultRecord> add_prompt_list(int32_t i, pipeline::Scheduler& sched);

  const JobOptions& o_;
  const model::Tokenizer& tok_;
  const ChatSetup& chat_;
  std::vector<io::PromptRecord> records_;
  std::vector<PromptPlan> plans_;
  // Per `continuations` line or prompt-array request, one plan per row (continuation, or element's sample).
  std::map<int32_t, std::vector<PromptPlan>> choice_plans_;
  std::map<int32_t, std::vector<io::ResultRecord>> unfinished_;  // prompts with some samples finished
};

}  // namespace glacier::app
