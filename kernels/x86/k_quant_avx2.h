// K-quant (Q2_K..Q6_K, IQ4_XS) x Q8_K dots and Q8_K row quantization in 256-bit AVX2 registers, in the
// arithmetic of ref/dot_k_quant_ref.cpp (one integer a super-block for Q4_K..Q6_K, ggml-cpu's AVX2 lanes
// for the others). Included by the AVX2 and the AVX-512 variant: everything sits in an
// anonymous namespace, so each translation unit keeps its own copy built with its own flags.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/k_quant_layout.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/lanes_256.h"

namespace glacier::kernels {
namespace {
namespace kquant {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Decoded Q4_K/Q5_K super-block: 8 vectors of 32 unsigned levels (one per sub-block), each sub-block's
// scale broadcast to 16 int16 lanes, and the 8 mins as int16.
struct K4Block {
  __m256i levels[8];
  __m256i scale[8];
  __m128i mins;
};

inline void unpack_scales(const uint8_t* packed, K4Block& k) {
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    k4_scale_min(packed, j, sc[j], mn[j]);
    k.scale[j] = _mm256_set1_epi16(static_cast<int16_t>(sc[j]));
  }
  k.mins = _mm_setr_epi16(mn[0], mn[1], mn[2], mn[3], mn[4], mn[5], mn[6], mn[7]);
}

inline void unpack_nibbles(const uint8_t* qs, K4Block& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i bits = load256(qs + 32 * c);
    k.levels[2 * c] = _mm256_and_si256(bits, m4);
    k.levels[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
  }
}

inline K4Block decode(const BlockQ4_K& b) {
  K4Block k;
  unpack_scales(b.scales, k);
  unpack_nibbles(b.qs, k);
  return k;
}

inline K4Block decode(const BlockQ5_K& b) {
  K4Block k;
  unpack_scales(b.scales, k);
  unpack_nibbles(b.qs, k);
  const __m256i hbits = load256(b.qh);
  const __m256i one = _mm256_set1_epi8(1);
  for (int s = 0; s < 8; ++s) {
    // 16-bit shifts are per byte here: only bit 0 of each byte survives the mask, and 1 << 4 stays in it.
    const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(s)), one);
    k.levels[s] = _mm256_or_si256(k.levels[s], _mm256_slli_epi16(bit, 4));
  }
  return k;
}

// mins_k * (q8 sum of sub-block) in 4 lanes, sub-blocks 2k and 2k + 1 in lane k.
inline __m128i mins_products(__m128i mins, const BlockQ8_K& x) {
  const __m256i sums16 = load256(x.bsums);
  const __m128i per_sub_block = _mm_hadd_epi16(_mm256_castsi256_si128(sums16), _mm256_extracti128_si256(sums16, 1));
  return _mm_madd_epi16(mins, per_sub_block);
}

// Lane l: sum over sub-blocks of scale * (levels . q8) over elements 4l..4l+3 of the sub-block.
inline __m256i scaled_lanes(const K4Block& k, const BlockQ8_K& x) {
  __m256i sumi = _mm256_setzero_si256();
  for (int s = 0; s < 8; ++s) {
    const __m256i pairs = _mm256_maddubs_epi16(k.levels[s], load256(x.qs + 32 * s));
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(k.scale[s], pairs));
  }
  return sumi;
}


// Decoded super-block of 16-element sub-blocks (Q2_K, Q3_K, Q6_K): per 32-element chunk c its unsigned
// levels and the scales of its two sub-blocks (2c in the low 128 bits, 2c + 1 in the high), as int16;
// Q2_K also its 16 mins.
struct Sub16Block {
  __m256i levels[8];
  __m256i scale[8];
  __m256i mins;
};

inline __m256i chunk_scales(int low, int high) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(high)), _mm_set1_epi16(static_cast<int16_t>(low)));
}

// The 2-bit fields of 128 elements' bytes (Q2_K's levels, Q3_K's low bits): field k of byte l is element 32k + l.
inline void unpack_crumbs(const uint8_t* qs, __m256i* levels) {
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m256i bits = load256(qs);
  for (int k = 0; k < 4; ++k) levels[k] = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * k)), m2);
}

inline void decode(const BlockQ2_K& b, Sub16Block& k) {
  unpack_crumbs(b.qs, k.levels);
  unpack_crumbs(b.qs + 32, k.levels + 4);
  for (int c = 0; c < 8; ++c) k.scale[c] = chunk_scales(b.scales[2 * c] & 0x0f, b.scales[2 * c + 1] & 0x0f);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  k.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f)));
}

inline void decode(const BlockQ3_K& b, Sub16Block& k) {
  unpack_crumbs(b.qs, k.levels);
  unpack_crumbs(b.qs + 32, k.levels + 4);
  const __m256i hbits = load256(b.hmask), one = _mm256_set1_epi8(1);
  for (int c = 0; c < 8; ++c) {
    // Per-byte shift as in decode(BlockQ5_K): only bit 0 of each byte survives the mask.
    const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(c)), one);
    k.levels[c] = _mm256_or_si256(k.levels[c], _mm256_slli_epi16(bit, 2));
  }
  // All 16 scales at once, 4 a 32-bit word (the layout of q3_k_scale): word w holds sub-blocks 4w..4w+3,
  // their low nibbles from bytes 0-3 (w even) or 4-7 (w odd), low or high half (w < 2 or not), and
  // their top bits from bits 2w..2w+1 of bytes 8-11.
  uint32_t packed[3], words[4];
  std::memcpy(packed, b.scales, sizeof(packed));
  for (int w = 0; w < 4; ++w)
    words[w] = ((packed[w % 2] >> (4 * (w / 2))) & 0x0f0f0f0fu) | (((packed[2] >> (2 * w)) & 0x03030303u) << 4);
  uint8_t codes[16];
  std::memcpy(codes, words, sizeof(codes));
  for (int c = 0; c < 8; ++c) k.scale[c] = chunk_scales(codes[2 * c] - 32, codes[2 * c + 1] - 32);
}

inline void decode(const BlockQ6_K& b, Sub16Block& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i lo1 = load256(b.ql + 64 * h), lo2 = load256(b.ql + 64 * h + 32);
    const __m256i hb = load256(b.qh + 32 * h);
    auto high = [&](int shift) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(shift)), m2), 4);
    };
    k.levels[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(lo1, m4), high(0));
    k.levels[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(lo2, m4), high(2));
    k.levels[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4), high(4));
    k.levels[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo2, 4), m4), high(6));
  }
  for (int c = 0; c < 8; ++c) k.scale[c] = chunk_scales(b.scales[2 * c], b.scales[2 * c + 1]);
}

// Lane l: sum over chunks of scale * ((level - Offset) . q8) over elements 4l..4l+3 of the chunk, the
// offset taken off as Offset . q8 since maddubs needs the unsigned operand. Exact: a maddubs pair is at
// most 2 * 63 * 127 (Q6_K's levels) and 2 * 32 * 127 for the offset, far inside int16.
template <int Offset>
inline __m256i sub16_lanes(const Sub16Block& k, const BlockQ8_K& x) {
  const __m256i offset = _mm256_set1_epi8(Offset);
  __m256i sumi = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) {
    const __m256i q8 = load256(x.qs + 32 * c);
    __m256i pairs = _mm256_maddubs_epi16(k.levels[c], q8);
    if constexpr (Offset != 0) pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(offset, q8));
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(k.scale[c], pairs));
  }
  return sumi;
}

// Q2_K (kMins: the mins term, lane k = sub-blocks 2k and 2k + 1 against their block sums, fused first)
// and Q3_K (levels offset by 4), in 8 float lanes.
template <class Block, int Offset, bool kMins>
struct Sub16Dot {
  using W = Block;
  using X = BlockQ8_K;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      Sub16Block k;
      decode(w[b], k);
      const float wd = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& xb = x[r][b];
        if constexpr (kMins) {
          const __m256i mins = _mm256_madd_epi16(k.mins, load256(xb.bsums));
          acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-xb.d * _cvtsh_ss(w[b].dmin)), _mm256_cvtepi32_ps(mins), acc[r]);
        }
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(xb.d * wd), _mm256_cvtepi32_ps(sub16_lanes<Offset>(k, xb)), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
  }
};

using Q2KDot = Sub16Dot<BlockQ2_K, 0, true>;
using Q3KDot = Sub16Dot<BlockQ3_K, 4, false>;

inline Sub16Block decode(const BlockQ6_K& b) {
  Sub16Block k;
  decode(b, k);
  return k;
}

// A super-block's levels' integer lanes: Q4_K/Q5_K, and Q6_K (its levels offset by 32).
inline __m256i levels_lanes(const K4Block& k, const BlockQ8_K& x) { return scaled_lanes(k, x); }
inline __m256i levels_lanes(const Sub16Block& q6_k, const BlockQ8_K& x) { return sub16_lanes<32>(q6_k, x); }

// Q4_K, Q5_K and Q6_K: per super-block its levels' integer (the lanes summed, exactly) and, for Q4_K/Q5_K,
// then its mins', each fused into one float accumulator a row.
template <class Block>
struct SuperBlockSumDot {
  using W = Block;
  using X = BlockQ8_K;
  static constexpr bool kMins = !std::is_same_v<Block, BlockQ6_K>;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    float acc[R];
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const auto k = decode(w[b]);
      const float wd = _cvtsh_ss(w[b].d);
      float wdmin = 0.0f;
      if constexpr (kMins) wdmin = _cvtsh_ss(w[b].dmin);
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& xb = x[r][b];
        acc[r] = std::fma(xb.d * wd, static_cast<float>(hsum_epi32(levels_lanes(k, xb))), acc[r]);
        if constexpr (kMins)
          acc[r] = std::fma(-xb.d * wdmin, static_cast<float>(hsum_epi32(mins_products(k.mins, xb))), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = acc[r];
  }
};

using Q4KDot = SuperBlockSumDot<BlockQ4_K>;
using Q5KDot = SuperBlockSumDot<BlockQ5_K>;
using Q6KDot = SuperBlockSumDot<BlockQ6_K>;

// IQ4_XS: table levels by byte shuffle, |w| x sign(x, w) pairs, times the sub-block's signed scale.
struct IQ4XSDot {
  using W = BlockIQ4_XS;
  using X = BlockQ8_K;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      __m256i q[8], scale[8];
      for (int s = 0; s < 8; ++s) {
        const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * s));
        q[s] = _mm256_set_m128i(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bits, 4), m4)),
                                _mm_shuffle_epi8(table, _mm_and_si128(bits, m4)));
        scale[s] = _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(w[b], s)));
      }
      const float wd = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        __m256i lanes = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          const __m256i xq = load256(x[r][b].qs + 32 * s);
          const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(q[s]), _mm256_sign_epi8(xq, q[s]));
          lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(pairs, scale[s]));
        }
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(wd * x[r][b].d), _mm256_cvtepi32_ps(lanes), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
  }
};

// Q8_K quantization, bit-identical to quantize_row_q8_k_ref.
inline void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    BlockQ8_K& out = y[b];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xb + k)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    int first = 0;  // the first element of largest magnitude gives the sign, as in the reference
    while (amax != 0.0f && std::fabs(xb[first]) != amax) ++first;
    const float iscale = amax != 0.0f ? -127.0f / xb[first] : 0.0f;
    if (amax == 0.0f || !std::isfinite(iscale)) {  // see quantize_row_q8_k_ref
      out.d = amax == 0.0f ? 0.0f : 1.0f / iscale;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.bsums), _mm256_setzero_si256());
      for (int k = 0; k < kQK_K; k += 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + k), _mm256_setzero_si256());
      continue;
    }
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    const __m256 magic = _mm256_set1_ps(12582912.0f);  // fused rounding, see quantize_row_q8_k_ref
    for (int k = 0; k < kQK_K; k += 32) {
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 v = _mm256_sub_ps(_mm256_fmadd_ps(scale, _mm256_loadu_ps(xb + k + 8 * i), magic), magic);
        q[i] = _mm256_min_epi32(_mm256_cvttps_epi32(v), top);
      }
      // packs interleave 128-bit lanes; the permute restores element order.
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + k),
                          _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      // 16 bytes widened to int16 and summed pairwise: exact (|sum| <= 16 * 127).
      const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(out.qs + 16 * g)));
      __m128i s = _mm_add_epi16(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
      s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0x4e));
      s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0xb1));
      s = _mm_add_epi16(s, _mm_srli_epi32(s, 16));
      out.bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(s));
    }
    out.d = 1.0f / iscale;
  }
}

}  // namespace kquant
}  // namespace
}  // namespace glacier::kernels
