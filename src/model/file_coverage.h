// Nothing in a model file is silently ignored: every metadata key and every tensor is either used by the
// architecture's code, known to be harmless (with the reason), or refused with a message naming it.
#pragma once
#include "gguf/gguf_fwd.h"

namespace glacier::model {

struct ModelConfig;

// Throws InputError naming the file and the first key that glacier does not understand for the
// architecture (an allow-list: general.*, tokenizer.*, quantize.* and the arch's own known keys).
void check_keys_understood(const gguf::File& file, const ModelConfig& cfg);
// Throws InputError naming the file and the first tensor that the loader would not map.
void check_tensors_used(const gguf::File& file, const ModelConfig& cfg);

}  // namespace glacier::model
