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
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K: {
      GLACIER_ASSERT(n % kQK_K == 0, "k-quant row length is not a multiple of 256");
      const size_t block = t == WeightType::Q4_K ? sizeof(BlockQ4_K)
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
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:
      // K-quant files come from llama-quantize; writing them needs its scale search, not done here.
      GLACIER_ASSERT(false, std::string("no encoder for ") + weight_type_name(t) + " weights");
      return;
  }
  GLACIER_ASSERT(false, "unknown weight type");
}

}  // namespace glacier::kernels
