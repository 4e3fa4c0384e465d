// The gated activations of the feed-forward block: out = act(gate) * up, with act chosen by the
// architecture table (SiLU for llama-likes, tanh-approximated GELU for gemma).
#pragma once
#include <cstdint>

#include "model/arch_table.h"

namespace glacier::compute {

// out may alias gate or up.
void gated_activation(model::FfnActivation act, const float* gate, const float* up, int64_t n, float* out);

// GELU (tanh form) as the references compute it: through a table indexed by the input rounded to
// f16, whose entries are the f32 result rounded to f16; 0 for x <= -10 and x for x >= 10.
float gelu_tanh_f16_table(float x);

}  // namespace glacier::compute
