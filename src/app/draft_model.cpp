// The draft model of --speculate draft:PATH: the vocabulary check and the in-process stage it runs on.
#include "app/draft_model.h"

#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {

namespace {
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";

std::vector<std::string> vocabulary(const gguf::File& f) {
  if (!f.find(kTokensKey))
    throw InputError("option --speculate: " + f.path() + ": expected key '" + kTokensKey +
                     "' (a vocabulary to compare with the model's), found none");
  return f.get_string_array(kTokensKey);
}
}  // namespace

void check_same_vocabulary(const gguf::File& draft, const gguf::File& target) {
  const std::vector<std::string> d = vocabulary(draft), t = vocabulary(target);
  const std::string what = "option --speculate: the draft model " + draft.path() + " must share the vocabulary of " +
                           target.path() + ": ";
  if (d.size() != t.size())
    throw InputError(what + "expected " + std::to_string(t.size()) + " tokens, found " + std::to_string(d.size()));
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != t[i])
      throw InputError(what + "token " + std::to_string(i) + ": expected '" + t[i] + "', found '" + d[i] + "'");
}

DraftModel::DraftModel(const std::string& path, const gguf::File& target, int32_t n_slots, int32_t n_ctx,
                       int32_t ubatch, ThreadPool& pool) {
  file_ = gguf::File::open(path);
  check_same_vocabulary(*file_, target);
  cfg_ = model::read_model_config(*file_);
  model::ShardWeights weights =
      model::load_shard(*file_, cfg_, model::LayerRange{0, cfg_.n_layer}, true, true, &pool);
  stage_ = std::make_unique<compute::TransformerStage>(cfg_, std::move(weights), n_slots, n_ctx, ubatch, pool);
  ring_ = std::make_unique<pipeline::LocalRing>(*stage_, 1);
  drafter_ = std::make_unique<pipeline::ModelDrafter>(*ring_, n_slots, n_ctx, ubatch);
  GLACIER_LOG_INFO("draft model %s: %d layers, %d KV slots of %d positions", path.c_str(), cfg_.n_layer, n_slots, n_ctx);
}

}  // namespace glacier::app
