// 256-bit lane helpers every x86 source of the dots needs alike: the float sum of 8 lanes in the reference's
// hsum8 order (dot_ref.cpp), exact int32 lane sums, bf16 widened to float, and a Q4_0-layout block's 32 nibbles. Internal linkage:
// each tier's file compiles its own copy with its own flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace glacier::kernels {
namespace {

// (hi + lo) per lane, then (t0 + t2) + (t1 + t3): the reference's hsum8, so every variant rounds alike.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Exact integer sums of 4 and 8 lanes (any order gives the same int32).
inline int32_t hsum_epi32(__m128i v) {
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
  return _mm_cvtsi128_si32(v);
}
inline int32_t hsum_epi32(__m256i v) {
  return hsum_epi32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// Eight bf16 values widened exactly to float: each one's bits in the high half of a float.
inline __m256 widen_bf16x8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

// The 32 nibbles of a Q4_0-layout block (16 bytes): elements 0..15 from the low nibbles, 16..31 from the
// high ones.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask));
}

}  // namespace
}  // namespace glacier::kernels
