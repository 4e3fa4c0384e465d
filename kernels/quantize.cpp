// Weight row encoders: scalar code, run once per weight when a model file is written, so speed
// matters far less than the blocks: Q8_0/Q4_0 exactly as llama-quantize writes them, the other types
// valid blocks by the simple rules of quantize.h.
#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "util/error.h"

namespace glacier::kernels {

size_t encoded_bytes(WeightType t, int64_t n) {
  GLACIER_ASSERT(n >= 0, "element count is negative");
  const size_t count = static_cast<size_t>(n);
  switch (t) {
    case WeightType::F32: return count * 4;
    case WeightType::F16:
    case WeightType::BF16: return count * 2;
    case WeightType::Q8_0:
      GLACIER_ASSERT(n % kQK8_0 == 0, "q8_0 row length is not a multiple of 32");
      return count / kQK8_0 * sizeof(BlockQ8_0);
    case WeightType::Q4_0:
      GLACIER_ASSERT(n % kQK4_0 == 0, "q4_0 row length is not a multiple of 32");
      return count / kQK4_0 * sizeof(BlockQ4_0);
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::IQ4_NL: {
      GLACIER_ASSERT(n % kQK8_0 == 0, std::string(weight_type_name(t)) + " row length is not a multiple of 32");
      const size_t block = t == WeightType::Q4_1 ? sizeof(BlockQ4_1)
                           : t == WeightType::Q5_0 ? sizeof(BlockQ5_0)
                           : t == WeightType::Q5_1 ? sizeof(BlockQ5_1) : sizeof(BlockIQ4_NL);
      return count / kQK8_0 * block;
    }
    case WeightType::IQ4_XS:
      GLACIER_ASSERT(n % kQK_K == 0, "iq4_xs row length is not a multiple of 256");
      return count / kQK_K * sizeof(BlockIQ4_XS);
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K: {
      GLACIER_ASSERT(n % kQK_K == 0, "k-quant row length is not a multiple of 256");
      const size_t block = t == WeightType::Q2_K   ? sizeof(BlockQ2_K)
                           : t == WeightType::Q3_K ? sizeof(BlockQ3_K)
                           : t == WeightType::Q4_K ? sizeof(BlockQ4_K)
                           : t == WeightType::Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
      return count / kQK_K * block;
    }
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return 0;
}

void encode_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "q8_0 row length is not a multiple of 32");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    // Dividing by d would round differently in a few cases; the reference multiplies by 1/d.
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(xb[j] * inv_d));
  }
}

void encode_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  GLACIER_ASSERT(n % kQK4_0 == 0, "q4_0 row length is not a multiple of 32");
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* xb = x + b * kQK4_0;
    float amax = 0.0f;
    float signed_max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        signed_max = xb[j];
      }
    }
    // Mapping the extreme element to -8 (not +7) uses the asymmetric range's extra level.
    const float d = signed_max / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    auto level = [&](float v) {
      const int q = static_cast<int>(std::floor(v * inv_d + 8.5f));
      return static_cast<uint8_t>(std::clamp(q, 0, 15));
    };
    for (int j = 0; j < kHalf; ++j)
      y[b].qs[j] = static_cast<uint8_t>(level(xb[j]) | (level(xb[j + kHalf]) << 4));
  }
}

namespace {

// Writes 32 levels (0..31) into the nibbles and, when qh is set, the fifth bits.
void pack_levels(const int (&q)[kQK8_0], uint8_t* qs, uint8_t* qh) {
  constexpr int kHalf = kQK8_0 / 2;
  uint32_t high = 0;
  for (int j = 0; j < kHalf; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kHalf] & 0x0f) << 4));
  for (int j = 0; j < kQK8_0; ++j) high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  if (qh) std::memcpy(qh, &high, 4);
}

// Min/range blocks (Q4_1, Q5_1): levels 0..max_level over [min, max].
template <class Block>
void encode_min_blocks(const float* x, Block* y, int64_t n, int max_level) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float lo = xb[0], hi = xb[0];
    for (int j = 1; j < kQK8_0; ++j) {
      lo = std::min(lo, xb[j]);
      hi = std::max(hi, xb[j]);
    }
    const float d = (hi - lo) / static_cast<float>(max_level);
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(lo);
    int q[kQK8_0];
    for (int j = 0; j < kQK8_0; ++j)
      q[j] = std::clamp(static_cast<int>(std::floor((xb[j] - lo) * inv_d + 0.5f)), 0, max_level);
    if constexpr (requires { y[b].qh; }) {
      pack_levels(q, y[b].qs, y[b].qh);
    } else {
      pack_levels(q, y[b].qs, nullptr);
    }
  }
}

// The element of largest magnitude, sign kept (the first one on ties).
float signed_extreme(const float* xb) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < kQK8_0; ++j)
    if (std::fabs(xb[j]) > amax) {
      amax = std::fabs(xb[j]);
      m = xb[j];
    }
  return m;
}

// Nearest IQ4_NL level index of v (levels are sorted; ties to the lower level).
int nearest_iq4_nl(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIQ4NLValues[k]) < std::fabs(v - kIQ4NLValues[best])) best = k;
  return best;
}

// Squared error of a block at scale d with levels q, and the levels nearest to x / d.
float iq4_nl_choose(const float* xb, float d, int (&q)[kQK8_0]) {
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  float err = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) {
    q[j] = nearest_iq4_nl(xb[j] * inv_d);
    const float e = xb[j] - d * kIQ4NLValues[q[j]];
    err += e * e;
  }
  return err;
}

}  // namespace

void encode_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "q4_1 row length is not a multiple of 32");
  encode_min_blocks(x, y, n, 15);
}

void encode_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "q5_1 row length is not a multiple of 32");
  encode_min_blocks(x, y, n, 31);
}

void encode_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "q5_0 row length is not a multiple of 32");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    // As Q4_0: the extreme element maps to -16, using the asymmetric range's extra level.
    const float d = signed_extreme(xb) / -16.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    int q[kQK8_0];
    for (int j = 0; j < kQK8_0; ++j) q[j] = std::clamp(static_cast<int>(std::floor(xb[j] * inv_d + 16.5f)), 0, 31);
    pack_levels(q, y[b].qs, y[b].qh);
  }
}

namespace {

// The IQ4_NL scale of one 32-element block and its levels (initial guess, then a least-squares refit
// kept when it lowers the squared error).
float iq4_nl_fit(const float* xb, int (&q)[kQK8_0]) {
  float d = signed_extreme(xb) / static_cast<float>(kIQ4NLValues[0]);
  const float err = iq4_nl_choose(xb, d, q);
  // Least-squares scale for the chosen levels: sum(x * v) / sum(v * v).
  double xv = 0.0, vv = 0.0;
  for (int j = 0; j < kQK8_0; ++j) {
    xv += static_cast<double>(xb[j]) * kIQ4NLValues[q[j]];
    vv += static_cast<double>(kIQ4NLValues[q[j]]) * kIQ4NLValues[q[j]];
  }
  if (vv > 0.0) {
    const float refit = static_cast<float>(xv / vv);
    int q2[kQK8_0];
    if (iq4_nl_choose(xb, refit, q2) < err) {
      d = refit;
      std::copy(q2, q2 + kQK8_0, q);
    }
  }
  return d;
}

}  // namespace

void encode_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "iq4_nl row length is not a multiple of 32");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int q[kQK8_0];
    y[b].d = f32_to_fp16(iq4_nl_fit(x + b * kQK8_0, q));
    pack_levels(q, y[b].qs, nullptr);
  }
}

void encode_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n) {
  GLACIER_ASSERT(n % kQK_K == 0, "iq4_xs row length is not a multiple of 256");
  constexpr int kSubBlocks = kQK_K / kQK8_0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    float sub_scale[kSubBlocks];
    float extreme = 0.0f;
    for (int s = 0; s < kSubBlocks; ++s) {
      int q[kQK8_0];
      sub_scale[s] = iq4_nl_fit(xb + kQK8_0 * s, q);
      if (std::fabs(sub_scale[s]) > std::fabs(extreme)) extreme = sub_scale[s];
    }
    BlockIQ4_XS& out = y[b];
    out = BlockIQ4_XS{};
    const float d = extreme / -32.0f;  // the largest sub-block scale lands on the 6-bit code 0 (-32)
    out.d = f32_to_fp16(d);
    const float d_stored = fp16_to_f32(out.d);
    const float inv_d = d_stored != 0.0f ? 1.0f / d_stored : 0.0f;
    for (int s = 0; s < kSubBlocks; ++s) {
      const int code = std::clamp(static_cast<int>(std::lround(sub_scale[s] * inv_d)) + 32, 0, 63);
      out.scales_l[s / 2] = static_cast<uint8_t>(out.scales_l[s / 2] | ((code & 0x0f) << (4 * (s % 2))));
      out.scales_h = static_cast<uint16_t>(out.scales_h | ((code >> 4) << (2 * s)));
      int q[kQK8_0];
      iq4_nl_choose(xb + kQK8_0 * s, d_stored * static_cast<float>(code - 32), q);
      for (int j = 0; j < kQK8_0 / 2; ++j)
        out.qs[16 * s + j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK8_0 / 2] & 0x0f) << 4));
    }
  }
}

namespace {

// Candidate step offsets of the scale searches: the sub-block's range is spread over nmax + r steps.
constexpr float kStepOffsets[] = {-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f};

// Round half to even, as nearbyint in the default mode, without its libm call (baseline x86-64 has no
// roundss): exact by the 1.5 * 2^23 trick for |v| < 2^22; larger values are clamped first, as every caller
// clamps the result to far fewer levels anyway.
float rounded(float v) {
  constexpr float kMagic = 12582912.0f, kLimit = 4194304.0f;
  return (std::clamp(v, -kLimit, kLimit) + kMagic) - kMagic;
}

// x ~ scale * q - min with q in 0..nmax, scale >= 0 and min >= 0 (the K-quant min formats store both
// unsigned): for each candidate spacing of the range [min(0, lo), hi], the levels it rounds to, then
// scale and min refitted to them by least squares; the candidate of least squared error wins.
struct ScaleMin {
  float scale = 0.0f;
  float min = 0.0f;
};

ScaleMin fit_scale_min(const float* x, int n, int nmax) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!(hi > lo)) return {0.0f, -lo};  // constant sub-block (at most 0): the min carries it
  auto error = [&](float scale, float min) {
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    double err = 0.0;
    for (int i = 0; i < n; ++i) {
      const float q = std::clamp(rounded((x[i] + min) * inv), 0.0f, static_cast<float>(nmax));
      const double diff = double(scale) * q - min - x[i];
      err += diff * diff;
    }
    return err;
  };
  ScaleMin best{(hi - lo) / static_cast<float>(nmax), -lo};
  double best_err = error(best.scale, best.min);
  for (float r : kStepOffsets) {
    const float iscale = (static_cast<float>(nmax) + r) / (hi - lo);
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = std::clamp(rounded(iscale * (x[i] - lo)), 0.0f, static_cast<float>(nmax));
      sq += q, sqq += q * q, sx += x[i], sqx += q * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (!(det > 0.0)) continue;
    double scale = (n * sqx - sq * sx) / det, offset = (sqq * sx - sq * sqx) / det;
    if (offset > 0.0) offset = 0.0, scale = sqx / sqq;  // a positive offset is not storable: min = 0
    if (!(scale > 0.0)) continue;
    const ScaleMin c{static_cast<float>(scale), static_cast<float>(-offset)};
    const double err = error(c.scale, c.min);
    if (err < best_err) best_err = err, best = c;
  }
  return best;
}

// x ~ scale * q with q in -nmax..nmax-1: candidate scales put the largest-magnitude element near -nmax
// (the range's extra level), each refitted by least squares to its levels; least squared error wins.
// The sign of the result is free (the largest element may be positive).
float fit_scale_symmetric(const float* x, int n, int nmax) {
  float extreme = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  if (extreme == 0.0f) return 0.0f;
  auto levels_error = [&](float scale, double* sqx, double* sqq) {
    const float inv = 1.0f / scale;
    double err = 0.0;
    *sqx = *sqq = 0.0;
    for (int i = 0; i < n; ++i) {
      const float q = std::clamp(rounded(x[i] * inv), static_cast<float>(-nmax), static_cast<float>(nmax - 1));
      const double diff = double(scale) * q - x[i];
      err += diff * diff, *sqx += double(q) * x[i], *sqq += double(q) * q;
    }
    return err;
  };
  float best = extreme / -static_cast<float>(nmax);
  double sqx, sqq;
  double best_err = levels_error(best, &sqx, &sqq);
  for (float r : kStepOffsets) {
    const float candidate = extreme / -(static_cast<float>(nmax) + r);
    levels_error(candidate, &sqx, &sqq);
    if (!(sqq > 0.0)) continue;
    const auto refit = static_cast<float>(sqx / sqq);
    if (refit == 0.0f) continue;
    const double err = levels_error(refit, &sqx, &sqq);
    if (err < best_err) best_err = err, best = refit;
  }
  return best;
}

// Two-level scales: the super-block scale that maps the largest sub-block value onto `top` codes, kept as
// fp16; returns the stored value.
float super_scale(const float* values, int count, float top, uint16_t& stored) {
  float max = 0.0f;
  for (int s = 0; s < count; ++s) max = std::max(max, values[s]);
  stored = f32_to_fp16(max / top);
  return fp16_to_f32(stored);
}

int code_for(float value, float unit, int lo, int hi) {
  return unit != 0.0f ? std::clamp(static_cast<int>(rounded(value / unit)), lo, hi) : 0;
}

int level_for(float x, float scale, float min, int lo, int hi) {
  return scale != 0.0f ? std::clamp(static_cast<int>(rounded((x + min) / scale)), lo, hi) : 0;
}

// Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scale and min codes (packed as k4_scale_min reads them);
// writes the super-block scales and returns the unsigned levels 0..nmax.
template <class Block>
void encode_k4_super_block(const float* x, Block& out, int nmax, int (&q)[kQK_K]) {
  ScaleMin fit[8];
  float scales[8], mins[8];
  for (int s = 0; s < 8; ++s) {
    fit[s] = fit_scale_min(x + 32 * s, 32, nmax);
    scales[s] = fit[s].scale, mins[s] = fit[s].min;
  }
  const float d = super_scale(scales, 8, 63.0f, out.d), dmin = super_scale(mins, 8, 63.0f, out.dmin);
  std::memset(out.scales, 0, sizeof(out.scales));
  for (int s = 0; s < 8; ++s) {
    const int sc = code_for(scales[s], d, 0, 63), mn = code_for(mins[s], dmin, 0, 63);
    if (s < 4) {
      out.scales[s] = static_cast<uint8_t>(out.scales[s] | sc);
      out.scales[s + 4] = static_cast<uint8_t>(out.scales[s + 4] | mn);
    } else {
      out.scales[s + 4] = static_cast<uint8_t>((sc & 0x0f) | ((mn & 0x0f) << 4));
      out.scales[s - 4] = static_cast<uint8_t>(out.scales[s - 4] | ((sc >> 4) << 6));
      out.scales[s] = static_cast<uint8_t>(out.scales[s] | ((mn >> 4) << 6));
    }
    const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(mn);
    for (int j = 32 * s; j < 32 * s + 32; ++j) q[j] = level_for(x[j], scale, min, 0, nmax);
  }
}

// Low nibbles of elements 64c + l, high nibbles of 64c + 32 + l, into qs[32c + l] (Q4_K/Q5_K).
void pack_k4_nibbles(const int (&q)[kQK_K], uint8_t* qs) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0x0f) | ((q[64 * c + 32 + l] & 0x0f) << 4));
}

// 2-bit fields: element 128h + 32k + l at bits 2k of qs[32h + l] (Q2_K levels, Q3_K low bits).
void pack_crumbs(const int (&q)[kQK_K], uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      int byte = 0;
      for (int k = 0; k < 4; ++k) byte |= (q[128 * h + 32 * k + l] & 3) << (2 * k);
      qs[32 * h + l] = static_cast<uint8_t>(byte);
    }
}

// Symmetric 16-element sub-blocks (Q3_K, Q6_K): each sub-block's scale, the super-block scale d that puts
// the largest-magnitude one on code_lo (sign kept), the codes, and the levels for the stored scales.
float encode_symmetric_super_block(const float* x, int nmax, int code_lo, int code_hi, int (&codes)[16],
                                   int (&q)[kQK_K], uint16_t& stored_d) {
  float scales[16], extreme = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scales[s] = fit_scale_symmetric(x + 16 * s, 16, nmax);
    if (std::fabs(scales[s]) > std::fabs(extreme)) extreme = scales[s];
  }
  stored_d = f32_to_fp16(extreme / static_cast<float>(code_lo));
  const float d = fp16_to_f32(stored_d);
  for (int s = 0; s < 16; ++s) {
    codes[s] = code_for(scales[s], d, code_lo, code_hi);
    const float scale = d * static_cast<float>(codes[s]);
    for (int j = 16 * s; j < 16 * s + 16; ++j) q[j] = level_for(x[j], scale, 0.0f, -nmax, nmax - 1);
  }
  return d;
}

// Calls encode(its 256 inputs, its block) for each super-block of a row of n (a multiple of 256).
template <class Block, class Encode>
void encode_super_blocks(const float* x, Block* y, int64_t n, const char* type, Encode encode) {
  GLACIER_ASSERT(n % kQK_K == 0, std::string(type) + " row length is not a multiple of 256");
  for (int64_t b = 0; b < n / kQK_K; ++b) encode(x + b * kQK_K, y[b]);
}

}  // namespace

void encode_row_q2_k(const float* x, BlockQ2_K* y, int64_t n) {
  encode_super_blocks(x, y, n, "q2_k", [](const float* xb, BlockQ2_K& out) {
    float scales[16], mins[16];
    for (int s = 0; s < 16; ++s) {
      const ScaleMin f = fit_scale_min(xb + 16 * s, 16, 3);
      scales[s] = f.scale, mins[s] = f.min;
    }
    const float d = super_scale(scales, 16, 15.0f, out.d), dmin = super_scale(mins, 16, 15.0f, out.dmin);
    int q[kQK_K];
    for (int s = 0; s < 16; ++s) {
      const int sc = code_for(scales[s], d, 0, 15), mn = code_for(mins[s], dmin, 0, 15);
      out.scales[s] = static_cast<uint8_t>(sc | (mn << 4));
      for (int j = 16 * s; j < 16 * s + 16; ++j)
        q[j] = level_for(xb[j], d * static_cast<float>(sc), dmin * static_cast<float>(mn), 0, 3);
    }
    pack_crumbs(q, out.qs);
  });
}

void encode_row_q3_k(const float* x, BlockQ3_K* y, int64_t n) {
  encode_super_blocks(x, y, n, "q3_k", [](const float* xb, BlockQ3_K& out) {
    int codes[16], q[kQK_K];
    encode_symmetric_super_block(xb, 4, -32, 31, codes, q, out.d);
    std::memset(out.scales, 0, sizeof(out.scales));
    for (int s = 0; s < 16; ++s) {
      const int code = codes[s] + 32;  // stored 0..63, read back as code - 32 (q3_k_scale)
      out.scales[s % 8] = static_cast<uint8_t>(out.scales[s % 8] | ((code & 0x0f) << (4 * (s / 8))));
      out.scales[8 + s % 4] = static_cast<uint8_t>(out.scales[8 + s % 4] | ((code >> 4) << (2 * (s / 4))));
    }
    std::memset(out.hmask, 0, sizeof(out.hmask));
    for (int i = 0; i < kQK_K; ++i) {
      q[i] += 4;  // 0..7: low 2 bits in qs, the third in hmask
      if (q[i] & 4) out.hmask[i % 32] = static_cast<uint8_t>(out.hmask[i % 32] | (1 << (i / 32)));
    }
    pack_crumbs(q, out.qs);
  });
}

void encode_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  encode_super_blocks(x, y, n, "q4_k", [](const float* xb, BlockQ4_K& out) {
    int q[kQK_K];
    encode_k4_super_block(xb, out, 15, q);
    pack_k4_nibbles(q, out.qs);
  });
}

void encode_row_q5_k(const float* x, BlockQ5_K* y, int64_t n) {
  encode_super_blocks(x, y, n, "q5_k", [](const float* xb, BlockQ5_K& out) {
    int q[kQK_K];
    encode_k4_super_block(xb, out, 31, q);
    pack_k4_nibbles(q, out.qs);
    std::memset(out.qh, 0, sizeof(out.qh));
    for (int i = 0; i < kQK_K; ++i)  // fifth bit of element i: bit i / 32 of qh[i % 32] (q5_k_level)
      if (q[i] & 16) out.qh[i % 32] = static_cast<uint8_t>(out.qh[i % 32] | (1 << (i / 32)));
  });
}

void encode_row_q6_k(const float* x, BlockQ6_K* y, int64_t n) {
  encode_super_blocks(x, y, n, "q6_k", [](const float* xb, BlockQ6_K& out) {
    int codes[16], q[kQK_K];
    encode_symmetric_super_block(xb, 32, -128, 127, codes, q, out.d);
    for (int s = 0; s < 16; ++s) out.scales[s] = static_cast<int8_t>(codes[s]);
    std::memset(out.ql, 0, sizeof(out.ql));
    std::memset(out.qh, 0, sizeof(out.qh));
    for (int i = 0; i < kQK_K; ++i) {  // placement as q6_k_level reads it
      const int v = q[i] + 32, half = i / 128, quarter = (i % 128) / 32, l = i % 32;
      uint8_t& low = out.ql[64 * half + 32 * (quarter % 2) + l];
      low = static_cast<uint8_t>(low | ((v & 0x0f) << (quarter < 2 ? 0 : 4)));
      out.qh[32 * half + l] = static_cast<uint8_t>(out.qh[32 * half + l] | ((v >> 4) << (2 * quarter)));
    }
  });
}

void encode_row_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void encode_row_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void encode_row(WeightType t, const float* x, void* out, int64_t n) {
  switch (t) {
    case WeightType::F32:
      std::memcpy(out, x, encoded_bytes(t, n));
      return;
    case WeightType::F16:
      encode_row_f16(x, static_cast<uint16_t*>(out), n);
      return;
    case WeightType::BF16:
      encode_row_bf16(x, static_cast<uint16_t*>(out), n);
      return;
    case WeightType::Q8_0:
      encode_row_q8_0(x, static_cast<BlockQ8_0*>(out), n);
      return;
    case WeightType::Q4_0:
      encode_row_q4_0(x, static_cast<BlockQ4_0*>(out), n);
      return;
    case WeightType::Q4_1:
      encode_row_q4_1(x, static_cast<BlockQ4_1*>(out), n);
      return;
    case WeightType::Q5_0:
      encode_row_q5_0(x, static_cast<BlockQ5_0*>(out), n);
      return;
    case WeightType::Q5_1:
      encode_row_q5_1(x, static_cast<BlockQ5_1*>(out), n);
      return;
    case WeightType::IQ4_NL:
      encode_row_iq4_nl(x, static_cast<BlockIQ4_NL*>(out), n);
      return;
    case WeightType::IQ4_XS:
      encode_row_iq4_xs(x, static_cast<BlockIQ4_XS*>(out), n);
      return;
    case WeightType::Q2_K:
      encode_row_q2_k(x, static_cast<BlockQ2_K*>(out), n);
      return;
    case WeightType::Q3_K:
      encode_row_q3_k(x, static_cast<BlockQ3_K*>(out), n);
      return;
    case WeightType::Q4_K:
      encode_row_q4_k(x, static_cast<BlockQ4_K*>(out), n);
      return;
    case WeightType::Q5_K:
      encode_row_q5_k(x, static_cast<BlockQ5_K*>(out), n);
      return;
    case WeightType::Q6_K:
      encode_row_q6_k(x, static_cast<BlockQ6_K*>(out), n);
      return;
  }
  GLACIER_ASSERT(false, "unknown weight type");
}

}  // namespace glacier::kernels
