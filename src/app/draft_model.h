// --speculate draft:PATH on a driver rank: opens the draft model, checks that it shares the target's
// vocabulary, and runs all its layers in this process on a ring of its own for the scheduler's drafter.
#pragma once
#include <memory>
#include <string>

#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "pipeline/local_ring.h"
#include "pipeline/model_drafter.h"
#include "util/thread_pool.h"

namespace glacier::app {

// Throws InputError naming both files and the first token that differs when the draft's vocabulary
// (tokenizer.ggml.tokens) is not the target's: a draft's ids would mean other tokens.
void check_same_vocabulary(const gguf::File& draft, const gguf::File& target);

class DraftModel {
 public:
  // The draft keeps one KV slot per target slot, over the same context; it computes on `pool` between
  // the driver's micro-batches (the driver's thread does both, so they never overlap).
  DraftModel(const std::string& path, const gguf::File& target, int32_t n_slots, int32_t n_ctx, int32_t ubatch,
             ThreadPool& pool);
  pipeline::ModelDrafter& drafter() { return *drafter_; }
  const model::ModelConfig& config() const { return cfg_; }

 private:
  std::unique_ptr<gguf::File> file_;
  model::ModelConfig cfg_;
  std::unique_ptr<compute::TransformerStage> stage_;
  std::unique_ptr<pipeline::LocalRing> ring_;
  std::unique_ptr<pipeline::ModelDrafter> drafter_;
};

}  // namespace glacier::app
