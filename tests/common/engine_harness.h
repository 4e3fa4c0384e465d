// Test harness: a whole single-process engine (model file, tokenizer, one stage holding every layer,
// a local ring) and helpers that run greedy generation, full-logit passes and perplexity on it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/local_model.h"
#include "pipeline/scheduler.h"

namespace glacier::testing {

struct EngineHarness : app::LocalModel {
  explicit EngineHarness(const std::string& model_path, int32_t ctx = 512, int32_t slots = 8,
                         int32_t ubatch = 512, int threads = 2);

  // Logits of every position of `tokens` (one sequence, fresh slot 0): [n_tokens x n_vocab].
  std::vector<float> all_logits(const std::vector<int32_t>& tokens);
  // Runs the requests through a scheduler over a local ring; outcomes indexed by request seq.
  // draft_max > 0: speculative decoding by prompt lookup (SchedulerOptions::draft_max), its counts to
  // `counts` when given.
  std::vector<pipeline::SequenceOutcome> run(std::vector<pipeline::SequenceRequest> requests,
                                             int32_t ubatch = 0, int32_t max_in_flight = 2, int32_t draft_max = 0,
                                             pipeline::SpeculationCounts* counts = nullptr);
  // Greedy generation of n tokens for each prompt (tokenized with BOS).
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::string>& prompts, int32_t n_tokens);

  int32_t n_slots = 0;
};

}  // namespace glacier::testing
