// Test helper for edited copies of a GGUF file: its keys and tensors into a Writer, and loading a copy.
#include "common/gguf_copy.h"

#include <cstdint>
#include <vector>

#include "common/input_error.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace glacier::testing {

void copy_keys(const gguf::File& from, gguf::Writer& to, const std::string& except) {
  for (const auto& [key, value] : from.metadata())
    if (key != except) to.set(key, value);
}

void copy_tensors(const gguf::File& from, gguf::Writer& to, const std::string& except) {
  for (const gguf::TensorInfo& t : from.tensors()) {
    if (t.name == except) continue;
    to.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                  std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
}

std::string model_load_refusal(const std::string& path) {
  return refusal_message([&] {
    const auto f = gguf::File::open(path);
    const model::ModelConfig cfg = model::read_model_config(*f);
    model::load_shard(*f, cfg, {0, cfg.n_layer}, true, true);
  });
}

}  // namespace glacier::testing
