// Hyperparameters of a transformer read from GGUF metadata (ARCH.* keys), validated before any
// weight is touched. The architecture table (arch_table.h) says which keys and tensors each arch uses.
#pragma once
#include <cstdint>
#include <string>

namespace glacier::gguf {
class File;
}

namespace glacier::model {

enum class RopeMode { Normal, NeoX };  // Normal rotates adjacent pairs, NeoX the two halves of a head

struct ModelConfig {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;     // per head, of q/k and v
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  int32_t n_rot = 0;        // rotated dims of a head
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  RopeMode rope_mode = RopeMode::Normal;

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and checks the config; throws InputError naming the file and key (missing key, bad value, an
// unsupported architecture with the list of supported ones).
ModelConfig read_model_config(const gguf::File& file);

}  // namespace glacier::model
