// Rotary position embedding. Normal (llama) mode rotates adjacent pairs (x[2i], x[2i+1]); NeoX mode
// rotates (x[i], x[i + n_rot/2]). Pair i turns by pos * base^(-2i/n_rot), adjusted by the file's rope
// scaling (RopeParams). The angles of a position are computed once (rope_angles) and applied to every
// head of the token (q and k alike).
#pragma once
#include <cstdint>

namespace glacier::kernels {

// How the angle of pair i at position pos is formed (the scaling forms llama.cpp's GGUF files use):
//   extrapolated = pos * base^(-2i/n_rot) / freq_factors[i]       (Llama 3 rope_freqs; 1 without)
//   interpolated = freq_scale * extrapolated                        (linear scaling: 1 / factor)
//   angle = interpolated, or with YaRN (ext_factor > 0) the mix interpolated * (1 - r) + extrapolated * r,
//   r = ext_factor * (1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1));
//   cos and sin are multiplied by mscale (times 1 + 0.1 ln(1 / freq_scale) with YaRN).
struct RopeParams {
  int32_t n_rot = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // n_rot / 2 divisors, or nullptr
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;  // YaRN's correction range, in pairs
  float mscale = 1.0f;
};

// cos_out[i], sin_out[i] for the n_rot / 2 pairs at position pos.
void rope_angles(const RopeParams& p, int32_t pos, float* cos_out, float* sin_out);
void rope_apply_normal(float* head, int32_t n_rot, const float* cos_in, const float* sin_in);
void rope_apply_neox(float* head, int32_t n_rot, const float* cos_in, const float* sin_in);

}  // namespace glacier::kernels
