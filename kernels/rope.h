// Rotary position embedding of one attention head. Normal (llama) mode rotates adjacent pairs
// (x[2i], x[2i+1]); NeoX mode rotates (x[i], x[i + n_rot/2]). Pair i turns by pos * base^(-2i/n_rot).
#pragma once
#include <cstdint>

namespace glacier::kernels {

void rope_normal(float* head, int32_t n_rot, int32_t pos, float base);
void rope_neox(float* head, int32_t n_rot, int32_t pos, float base);

}  // namespace glacier::kernels
