// Rotary position embedding. Normal (llama) mode rotates adjacent pairs (x[2i], x[2i+1]); NeoX mode
// rotates (x[i], x[i + n_rot/2]). Pair i turns by pos * base^(-2i/n_rot). The angles of a position are
// computed once (rope_angles) and applied to every head of the token (q and k alike).
#pragma once
#include <cstdint>

namespace glacier::kernels {

// cos_out[i], sin_out[i] for the n_rot / 2 pairs at position pos.
void rope_angles(int32_t n_rot, int32_t pos, float base, float* cos_out, float* sin_out);
void rope_apply_normal(float* head, int32_t n_rot, const float* cos_in, const float* sin_in);
void rope_apply_neox(float* head, int32_t n_rot, const float* cos_in, const float* sin_in);

}  // namespace glacier::kernels
