// Loading a whole model into one process (local_model.h): the weights are loaded and checked before the
// tokenizer is read, as the library's Engine has always done it.
#include "app/local_model.h"

#include "model/model_weights.h"

namespace glacier::app {

void LocalModel::open(const std::string& path, int threads) {
  file = gguf::File::open(path);
  cfg = model::read_model_config(*file);
  pool = std::make_unique<ThreadPool>(threads);
}

void LocalModel::load(int32_t ctx, int32_t n_slots, int32_t ubatch) {
  n_ctx = ctx;
  model::ShardWeights weights =
      model::load_shard(*file, cfg, model::LayerRange{0, cfg.n_layer}, true, true, pool.get());
  tok = model::Tokenizer::from_gguf(*file);
  stage = std::make_unique<compute::TransformerStage>(cfg, std::move(weights), n_slots, n_ctx, ubatch, *pool);
}

}  // namespace glacier::app
