// A model held whole by one process: its file and config, a thread pool, its tokenizer and one stage with
// every layer, the embedding and the head. The library's Engine and the tests' EngineHarness run on it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "util/thread_pool.h"

namespace glacier::app {

struct LocalModel {
  // Maps and checks the file, reads its config and starts `threads` compute threads. Throws InputError.
  void open(const std::string& path, int threads);
  // After open: loads and checks every layer (the finite scan split over the pool), reads the tokenizer and
  // sets up the stage for n_slots sequences of ctx positions and micro-batches of up to ubatch tokens.
  void load(int32_t ctx, int32_t n_slots, int32_t ubatch);

  std::unique_ptr<gguf::File> file;
  model::ModelConfig cfg;
  std::unique_ptr<model::Tokenizer> tok;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<compute::TransformerStage> stage;
  int32_t n_ctx = 0;
};

}  // namespace glacier::app
