// The packed K-quant GEMM (packed_k_quant.h) written once over a vector width: included by
// packed_k_quant_avx2.cpp (8 rows a vector, a group as two units) and packed_k_quant_avx512.cpp (16 rows,
// a group as one unit), each with a traits struct V of its instructions. Per super-block and output the
// integer is the sum over sub-blocks of scale * (levels . q8); each sub-block's products are summed apart
// (dpbusd into int32 with VNNI, then one multiply by the scale; maddubs into int16 pairs without, then one
// madd with the scale in both halves), so a level vector costs one or two instructions a row. Q6_K's
// stored levels carry +32, taken off as 32 times the Q8_K block sums. The floats then follow
// ref/dot_k_quant_ref.cpp operation for operation.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <memory>
#include <type_traits>
#include <utility>

#include "kernels/packed_k_quant.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {
namespace packed_k {

constexpr int kQuadBytes = kKQuantQuadBytes;
constexpr int kVector = kKQuantQuadVector;

// Where a tile's units (V::kLanes rows of one group) start.
template <class V>
struct Unit {
  const uint8_t* group;
  int lane0;  // first lane of the unit in its group
};

template <class V, int G>
void units_at(const uint8_t* w, size_t group_bytes, int64_t u0, Unit<V> (&u)[G]) {
  constexpr int kUnits = kPackRows / V::kLanes;
  for (int g = 0; g < G; ++g) {
    const int64_t unit = u0 + g;
    u[g] = {w + (unit / kUnits) * group_bytes, static_cast<int>(unit % kUnits) * V::kLanes};
  }
}

// Super-blocks ahead that a tile prefetches while it streams a group from memory: the hardware prefetcher
// alone leaves one thread's decode GEMV far below the read loop's rate (avx512, bench_kernels
// packed/avx512/*/65536x4096/1, min of 12 alternating: Q5_K 10.4 ms without against 6.1 ms with).
// One super-block (2.3 KB of Q4_K, 3.3 KB of Q6_K) ahead beat two, the earlier choice (Q4_K 4.7
// against 5.2 ms, Q5_K 6.5 against 7.6, Q6_K 8.6 against 10.1; 2-thread decode of the 1.1B Q4_K_M
// 72-73 against 65-67 tok/s); half a super-block and four were slower, and avx2 measured 1 and 2 alike.
constexpr int64_t kPrefetchSuperBlocks = 1;
constexpr size_t kCacheLine = 64;

// Part `part` of `parts` of the cache lines of the super-block kPrefetchSuperBlocks after sb, fetched by
// its group's first unit (lane0 0) for all of them (they share every line). Prefetches past the matrix's
// end are harmless (no fault), so the last super-blocks need no test. Always inlined: GCC 12 finds a
// function of nothing but prefetches pure and deletes a call it did not inline (a plain inline helper
// took every prefetch out of the K-quant tiles).
[[gnu::always_inline]] inline void prefetch_ahead(int lane0, const uint8_t* sb, const KQuantPackedLayout& lay,
                                                  int part = 0, int parts = 1) {
  if (lane0 != 0) return;
  const size_t lines = (lay.super_block_bytes + kCacheLine - 1) / kCacheLine;
  const uint8_t* next = sb + kPrefetchSuperBlocks * lay.super_block_bytes;
  for (size_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l) __builtin_prefetch(next + l * kCacheLine, 0, 3);
}

// Calls f(std::integral_constant<int, i>{}) for i = 0 .. N - 1, unrolled: the index is a constant in f,
// so the shifts and offsets that depend on it are too (a loop the compiler left rolled made Q6_K's
// decode twice as slow).
template <class Fn, int... kI>
inline void unrolled_impl(Fn& f, std::integer_sequence<int, kI...>) {
  (f(std::integral_constant<int, kI>{}), ...);
}
template <int N, class Fn>
inline void unrolled(Fn&& f) {
  unrolled_impl(f, std::make_integer_sequence<int, N>{});
}

// Levels of quad q (0..3) of sub-block s of a Q4_K/Q5_K unit: elements 4q..4q+3 (lo) and 16+4q..16+4q+3
// (hi) of the sub-block, with the fifth bit for Q5_K.
template <class V, bool kQh>
inline void k4_levels(const uint8_t* sb, const KQuantPackedLayout& lay, int lane0, int s, int q, typename V::I& lo,
                      typename V::I& hi) {
  using I = typename V::I;
  const I m4 = V::set1_8(0x0f);
  const size_t lane_bytes = static_cast<size_t>(lane0) * kQuadBytes;
  const I raw = V::load(sb + lay.qs + (s * kK4QuadsPerSubBlock + q) * kVector + lane_bytes);
  lo = V::and_(raw, m4);
  hi = V::and_(V::template srli16<4>(raw), m4);
  if constexpr (kQh) {
    // Bit s of each qh byte to bit 4: 16-bit shifts act per byte here, as only one bit a byte is kept.
    const I bit4 = V::set1_8(0x10);
    auto fifth = [&](int h) {
      const I hb = V::load(sb + lay.qh + (h * kK4QuadsPerSubBlock + q) * kVector + lane_bytes);
      return V::and_(s <= 4 ? V::sll16(hb, 4 - s) : V::srl16(hb, s - 4), bit4);
    };
    lo = V::or_(lo, fifth(0));
    hi = V::or_(hi, fifth(1));
  }
}

// Q6_K's unsigned stored levels (level + 32) at quad q (0..7) of chunk K (0..3) of half H: elements
// 128H + 32K + 4q .. + 3, all in sub-block 8H + 2K + q / 4. Chunks 0..2 are the low 6 bits of their own
// vector; chunk 3 gathers its bit pairs from the three vectors' top bits, masked before each 16-bit shift
// so that no bit crosses into the next byte. One mask rather than one a bit pair: AVX2's 16 registers
// hold one constant fewer (with three, avx2-vnni's GEMV from memory was slower still).
template <class V, int H, int K>
inline typename V::I q6_levels(const uint8_t* sb, const KQuantPackedLayout& lay, int lane0, int q) {
  constexpr size_t kPlane = 8 * kVector;  // the quads of one of a half's three vectors
  const uint8_t* quad = sb + lay.qs + (H * 3 * 8 + q) * kVector + static_cast<size_t>(lane0) * kQuadBytes;
  if constexpr (K < 3) {
    return V::and_(V::load(quad + K * kPlane), V::set1_8(0x3f));
  } else {
    const auto top = V::set1_8(static_cast<char>(0xc0));
    const auto bits01 = V::template srli16<4>(V::and_(V::load(quad), top));
    const auto bits23 = V::template srli16<2>(V::and_(V::load(quad + kPlane), top));
    const auto bits45 = V::and_(V::load(quad + 2 * kPlane), top);
    return V::template srli16<2>(V::or_(V::or_(bits01, bits23), bits45));
  }
}

// Where a tile's level vectors come from. PackedLevels unpacks them from the packed super-block at each
// use: the decode GEMV reads a super-block once, so unpacking in the loop is free. ExpandedLevels loads
// them from a scratch that expand_levels filled: in a batch every row tile of a unit reads the same
// super-blocks, and unpacking them once for all rows takes the unpacking (Q5_K's fifth bit, Q6_K's
// chunk 3) out of the tile's loop.
template <class V, WeightType T>
struct PackedLevels {
  using I = typename V::I;
  const uint8_t* sb;
  const KQuantPackedLayout* lay;
  int lane0;
  void k4(int s, int q, I& lo, I& hi) const { k4_levels<V, T == WeightType::Q5_K>(sb, *lay, lane0, s, q, lo, hi); }
  template <int H, int K>
  I q6(int q) const {
    return q6_levels<V, H, K>(sb, *lay, lane0, q);
  }
};

// A unit's super-block unpacked: 64 level vectors, Q4_K/Q5_K as (sub-block s, quad q, lo then hi) and
// Q6_K as (half H, chunk K, quad q), in the order the tile reads them.
template <class V>
constexpr size_t kExpandedSuperBlockBytes = 64 * sizeof(typename V::I);

template <class V>
struct ExpandedLevels {
  using I = typename V::I;
  static constexpr size_t kBytes = sizeof(I);
  const uint8_t* e;
  void k4(int s, int q, I& lo, I& hi) const {
    lo = V::load(e + static_cast<size_t>(2 * (s * kK4QuadsPerSubBlock + q)) * kBytes);
    hi = V::load(e + static_cast<size_t>(2 * (s * kK4QuadsPerSubBlock + q) + 1) * kBytes);
  }
  template <int H, int K>
  I q6(int q) const {
    return V::load(e + static_cast<size_t>((H * 4 + K) * 8 + q) * kBytes);
  }
};

// Whether a tile's level sums prefetch the next super-block a sub-block's share at a time (the whole of
// it at once otherwise, at the super-block's start): where V::kPrefetchPerSubBlock, and only when the
// levels come from the packed weights (a tile streaming them). On Zen 3 (avx2, one thread, bench_kernels
// packed/avx2/*/65536x4096/1, medians of three alternating rounds) the burst of 37 to 53 prefetches at
// each super-block left Q4_K at 10.0-10.5 ms, Q5_K 15.3-15.6 and Q6_K 18.8-19.6; spread, 8.3-8.7,
// 10.8-11.9 and 13.1-13.5 (Q4_K at the read loop's rate); two super-blocks ahead was no better.
template <class V, class Levels>
constexpr bool kPrefetchInSums = V::kPrefetchPerSubBlock && !std::is_same_v<Levels, ExpandedLevels<V>>;

// Unpacks one super-block of each of G units into out (kExpandedSuperBlockBytes a unit, unit after unit).
template <class V, WeightType T, int G>
void expand_levels(const uint8_t* const (&sb)[G], const int (&lane0)[G], const KQuantPackedLayout& lay, uint8_t* out) {
  using I = typename V::I;
  constexpr size_t kBytes = sizeof(I);
  for (int g = 0; g < G; ++g) {
    uint8_t* e = out + static_cast<size_t>(g) * kExpandedSuperBlockBytes<V>;
    const PackedLevels<V, T> packed{sb[g], &lay, lane0[g]};
    if constexpr (T != WeightType::Q6_K) {
      for (int i = 0; i < 8 * kK4QuadsPerSubBlock; ++i) {
        I lo, hi;
        packed.k4(i / kK4QuadsPerSubBlock, i % kK4QuadsPerSubBlock, lo, hi);
        std::memcpy(e + static_cast<size_t>(2 * i) * kBytes, &lo, kBytes);
        std::memcpy(e + static_cast<size_t>(2 * i + 1) * kBytes, &hi, kBytes);
      }
    } else {
      unrolled<2>([&](auto h) {
        unrolled<4>([&](auto k) {
          for (int q = 0; q < 8; ++q) {
            const I lv = packed.template q6<h, k>(q);
            std::memcpy(e + static_cast<size_t>((h * 4 + k) * 8 + q) * kBytes, &lv, kBytes);
          }
        });
      });
    }
  }
}

// Quads of Q4_K/Q5_K summed into one int16 partial without VNNI: a maddubs lane is at most 2 * 15 * 127
// (Q4_K) or 2 * 31 * 127 (Q5_K), and a quad adds two (lo and hi) to each int16 lane, so half a sub-block
// (8 products a lane) fits int16 for both. Q4_K's whole sub-block would fit too, but with one madd a half
// it measured faster at every batch (avx2, one thread, 4096x4096, min of 6 alternating: 94 against 121 ms
// at 512 rows, 1.56 against 1.87 at 8, 0.235 against 0.311 at 1; avx512-novnni 46.5 against 58.3 at 512).
constexpr int kK4QuadsPerPartialWithoutVnni = kK4QuadsPerSubBlock / 2;

// The levels' integer of one Q4_K/Q5_K super-block for G units x R rows, added to sum.
template <class V, WeightType T, int G, int R, class Levels>
inline void k4_levels_sum(const uint8_t* const (&sb)[G], const int (&lane0)[G], const Levels (&levels)[G],
                          const KQuantPackedLayout& lay, const BlockQ8_K* const (&xb)[R], typename V::I (&sum)[G][R]) {
  using I = typename V::I;
  constexpr int kQuadsPerPartial = V::kVnni ? kK4QuadsPerSubBlock : kK4QuadsPerPartialWithoutVnni;
  auto sub_block = [&](int s) {
    if constexpr (kPrefetchInSums<V, Levels>)
      for (int g = 0; g < G; ++g) prefetch_ahead(lane0[g], sb[g], lay, s, 8);
    I scale[G];
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = sb[g] + lay.scales + s * kPackRows + lane0[g];
      scale[g] = V::kVnni ? V::widen_u8_32(p) : V::scale_pairs_u8(p);
    }
    for (int q0 = 0; q0 < kK4QuadsPerSubBlock; q0 += kQuadsPerPartial) {
      I part[G][R];  // int32 dots (VNNI) or int16 pairs
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) part[g][r] = V::zero();
      for (int q = q0; q < q0 + kQuadsPerPartial; ++q) {
        I lo[G], hi[G];
        for (int g = 0; g < G; ++g) levels[g].k4(s, q, lo[g], hi[g]);
        for (int r = 0; r < R; ++r) {
          const int8_t* xq = xb[r]->qs + 32 * s + kQuadBytes * q;
          const I x_lo = V::bcast32(xq), x_hi = V::bcast32(xq + 16);
          for (int g = 0; g < G; ++g) {
            if constexpr (V::kVnni) {
              part[g][r] = V::dpbusd(V::dpbusd(part[g][r], lo[g], x_lo), hi[g], x_hi);
            } else {
              part[g][r] = V::add16(part[g][r], V::add16(V::maddubs(lo[g], x_lo), V::maddubs(hi[g], x_hi)));
            }
          }
        }
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r)
          sum[g][r] = V::add32(sum[g][r], V::kVnni ? V::mullo32(part[g][r], scale[g]) : V::madd(part[g][r], scale[g]));
    }
  };
  // Unrolled where the levels are unpacked from the packed weights, as Q6_K's below (avx2, 4096x4096,
  // one row: Q4_K 0.31-0.40 -> 0.30-0.31 ms, Q5_K 0.56 -> 0.49-0.52), but for Q5_K's row tiles: its fifth
  // bits take the registers that unrolled code needs (eight rows 2.44-2.79 -> 2.83-2.98 ms unrolled).
  if constexpr (kPrefetchInSums<V, Levels> && (R == 1 || T == WeightType::Q4_K)) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) sub_block(s);
  } else {
    for (int s = 0; s < 8; ++s) sub_block(s);
  }
}

// The int16 pairs (sum of sub-block 2k, sum of 2k + 1) of a Q8_K activation block that Q4_K/Q5_K's mins
// term takes, pair k at dword kK4SumPair[k] of out: a madd of the 16 block sums with ones (the eight
// sub-block sums; |sum| <= 32 * 127 fits int16), packed back to words in place of four scalar set-ups.
constexpr int kK4SumPair[4] = {0, 1, 4, 5};  // packs works within 128-bit halves
inline void k4_sum_pairs(const BlockQ8_K& xb, int32_t (&out)[8]) {
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
  const __m256i sums = _mm256_madd_epi16(b, _mm256_set1_epi16(1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_packs_epi32(sums, sums));
}

// The 16 dwords a Q6_K super-block's sub-blocks take their +32 offset from, for one Q8_K activation block:
// -32 * bsum (VNNI, the start of the sub-block's dot) or the int16 pair (-16 * bsum, -16 * bsum) (a madd
// with the (scale, scale) pair). Made with a few vector instructions, where the scalar set-up of each
// dword had cost more than the 3-row tiles' level arithmetic. |bsum| <= 16 * 127, so -16 * bsum fits
// int16 (Q8_K levels stop at -127: quantize_row_q8_k). 256-bit code: every tier that includes this has it.
template <bool kVnni>
inline void q6_offsets(const BlockQ8_K& xb, int32_t (&out)[kQK_K / 16]) {
  auto* dst = reinterpret_cast<__m256i*>(out);
  if constexpr (kVnni) {
    const __m256i lo = _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)));
    const __m256i hi = _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
    _mm256_storeu_si256(dst, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(lo, 5)));
    _mm256_storeu_si256(dst + 1, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(hi, 5)));
  } else {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
    const __m256i w = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(b, 4));
    // unpacklo pairs sub-blocks 0-3 and 8-11, unpackhi 4-7 and 12-15: put the 128-bit halves in order.
    const __m256i lo = _mm256_unpacklo_epi16(w, w), hi = _mm256_unpackhi_epi16(w, w);
    _mm256_storeu_si256(dst, _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

// The integer of one Q6_K super-block for G units x R rows, added to sum: per 16-element sub-block the
// stored levels' dots less 32 times its Q8_K block sum, times the scale. With VNNI the dots start from
// -32 * bsum; without, a maddubs lane is at most 2 * 63 * 127, so two quads a partial, and the offset
// goes in as one more madd of (-16 * bsum, -16 * bsum) with the scale; either dword is one broadcast
// from q6_offsets' table. Where the levels stream from the weights the sub-blocks are unrolled, so that
// every offset is a constant: rolled, their loop control took as many instructions as the arithmetic.
template <class V, int G, int R, class Levels>
inline void q6_levels_sum(const uint8_t* const (&sb)[G], const int (&lane0)[G], const Levels (&levels)[G],
                          const KQuantPackedLayout& lay, const BlockQ8_K* const (&xb)[R], typename V::I (&sum)[G][R]) {
  using I = typename V::I;
  constexpr int kQuadsPerSubBlock = 4;
  constexpr int kQuadsPerPartial = V::kVnni ? kQuadsPerSubBlock : 2;
  constexpr int kSubBlocks = kQK_K / 16;
  alignas(32) int32_t offsets[R][kSubBlocks];
  for (int r = 0; r < R; ++r) q6_offsets<V::kVnni>(*xb[r], offsets[r]);
  // Half `half` of the 32-element chunk k of half h of the super-block: one 16-element sub-block.
  auto sub_block = [&](auto h, auto k, int half) {
    const int sub = 8 * h + 2 * k + half;
    if constexpr (kPrefetchInSums<V, Levels>)
      for (int g = 0; g < G; ++g) prefetch_ahead(lane0[g], sb[g], lay, sub, kSubBlocks);
    I scale[G];
    for (int g = 0; g < G; ++g) {
      const uint8_t* p = sb[g] + lay.scales + sub * kPackRows + lane0[g];
      scale[g] = V::kVnni ? V::widen_i8_32(p) : V::scale_pairs_i8(p);
    }
    I offset[R];
    for (int r = 0; r < R; ++r)
      offset[r] = V::bcast32(reinterpret_cast<const int8_t*>(offsets[r] + sub));
#pragma GCC unroll 2
    for (int q0 = kQuadsPerSubBlock * half; q0 < kQuadsPerSubBlock * (half + 1); q0 += kQuadsPerPartial) {
      I part[G][R];
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) part[g][r] = V::kVnni ? offset[r] : V::zero();
#pragma GCC unroll 4
      for (int q = q0; q < q0 + kQuadsPerPartial; ++q) {
        I lv[G];
        for (int g = 0; g < G; ++g) lv[g] = levels[g].template q6<h, k>(q);
        for (int r = 0; r < R; ++r) {
          const I xq = V::bcast32(xb[r]->qs + 32 * (4 * h + k) + kQuadBytes * q);
          for (int g = 0; g < G; ++g)
            part[g][r] = V::kVnni ? V::dpbusd(part[g][r], lv[g], xq) : V::add16(part[g][r], V::maddubs(lv[g], xq));
        }
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r)
          sum[g][r] = V::add32(sum[g][r], V::kVnni ? V::mullo32(part[g][r], scale[g]) : V::madd(part[g][r], scale[g]));
    }
    if constexpr (!V::kVnni) {
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) sum[g][r] = V::add32(sum[g][r], V::madd(offset[r], scale[g]));
    }
  };
  unrolled<2>([&](auto h) {
    unrolled<4>([&](auto k) {
      // Unrolled where the levels are unpacked from the packed weights (the decode GEMV, Q6_K 4096x4096/1:
      // 0.41 ms unrolled against 0.57 rolled); rolled where they come expanded (unrolled, the 3-row
      // tiles' accumulators spilled: 512 rows 189 against 156 ms).
      if constexpr (kPrefetchInSums<V, Levels>) {
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) sub_block(h, k, half);
      } else {
        for (int half = 0; half < 2; ++half) sub_block(h, k, half);
      }
    });
  });
}

// Units [u0, u0 + G) x activation rows [r0, r0 + R), super-blocks [b_begin, b_end): the first range of
// a row starts from zero, a later one from the partial sums the range before stored in y (a float stored
// and loaded back is the same float, so the sums are those of one pass). kExpanded: the levels come from
// `expanded`, the units' super-blocks from b_begin unpacked by expand_levels.
template <class V, WeightType T, int G, int R, bool kExpanded>
void tile(const uint8_t* w, size_t group_bytes, int64_t b_begin, int64_t b_end,
          int64_t rows, int64_t u0, const uint8_t* x, size_t x_row_bytes, int64_t r0, float* y, int64_t ldy,
          const uint8_t* expanded) {
  using I = typename V::I;
  using F = typename V::F;
  constexpr bool kK4 = T != WeightType::Q6_K;
  constexpr const KQuantPackedLayout& lay = kKQuantPackedLayout<T>;
  Unit<V> u[G];
  units_at<V, G>(w, group_bytes, u0, u);
  int lane0[G], valid[G];
  int64_t first[G];  // the matrix row of each unit's first lane
  for (int g = 0; g < G; ++g) {
    lane0[g] = u[g].lane0;
    first[g] = (u[g].group - w) / static_cast<int64_t>(group_bytes) * kPackRows + u[g].lane0;
    const int64_t left = rows - first[g];
    valid[g] = left < V::kLanes ? static_cast<int>(std::max<int64_t>(left, 0)) : V::kLanes;
  }
  auto out = [&](int g, int r) { return y + (r0 + r) * ldy + first[g]; };
  const BlockQ8_K* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = reinterpret_cast<const BlockQ8_K*>(x + (r0 + r) * x_row_bytes);
  F acc[G][R];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) {
      acc[g][r] = V::zero_ps();
      if (b_begin > 0 && valid[g] > 0) {
        float partial[V::kLanes] = {};
        std::memcpy(partial, out(g, r), static_cast<size_t>(valid[g]) * sizeof(float));
        std::memcpy(&acc[g][r], partial, sizeof partial);
      }
    }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const uint8_t* sb[G];
    for (int g = 0; g < G; ++g) {
      sb[g] = u[g].group + b * lay.super_block_bytes;
      // Batches re-read it from the caches, where a prefetch costs a load slot and no more; unpacked
      // ahead, the fill read it. Where the level sums prefetch it a sub-block at a time, they do.
      if constexpr (!kExpanded && !V::kPrefetchPerSubBlock) prefetch_ahead(u[g].lane0, sb[g], lay);
    }
    using Levels = std::conditional_t<kExpanded, ExpandedLevels<V>, PackedLevels<V, T>>;
    Levels levels[G];
    for (int g = 0; g < G; ++g) {
      if constexpr (kExpanded) {
        levels[g] = {expanded + static_cast<size_t>((b - b_begin) * G + g) * kExpandedSuperBlockBytes<V>};
      } else {
        levels[g] = {sb[g], &lay, lane0[g]};
      }
    }
    const BlockQ8_K* xb[R];
    for (int r = 0; r < R; ++r) xb[r] = xr[r] + b;
    I sum[G][R];
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < R; ++r) sum[g][r] = V::zero();
    if constexpr (kK4) {
      k4_levels_sum<V, T, G, R>(sb, lane0, levels, lay, xb, sum);
    } else {
      q6_levels_sum<V, G, R>(sb, lane0, levels, lay, xb, sum);
    }
    for (int g = 0; g < G; ++g) {
      const F wd = V::load_ph(reinterpret_cast<const uint16_t*>(sb[g] + lay.d) + u[g].lane0);
      for (int r = 0; r < R; ++r) acc[g][r] = V::fma(V::mul(V::set1_ps(xb[r]->d), wd), V::cvt(sum[g][r]), acc[g][r]);
    }
    if constexpr (kK4) {
      // The mins term: a madd of (min 2k, min 2k + 1) pairs against the (sum of sub-block 2k, sum of
      // 2k + 1) pair of the activation row, for each k; the row's pairs are broadcast once for all units.
      I sums[R][4];
      for (int r = 0; r < R; ++r) {
        alignas(32) int32_t pairs[8];
        k4_sum_pairs(*xb[r], pairs);
        for (int k = 0; k < 4; ++k) sums[r][k] = V::bcast32(reinterpret_cast<const int8_t*>(pairs + kK4SumPair[k]));
      }
      for (int g = 0; g < G; ++g) {
        const F wdmin = V::load_ph(reinterpret_cast<const uint16_t*>(sb[g] + lay.dmin) + u[g].lane0);
        I mins[4];
        for (int k = 0; k < 4; ++k) mins[k] = V::widen_u8_16(sb[g] + lay.mins + k * 2 * kPackRows + 2 * u[g].lane0);
        for (int r = 0; r < R; ++r) {
          I m = V::zero();
          for (int k = 0; k < 4; ++k) m = V::add32(m, V::madd(mins[k], sums[r][k]));
          acc[g][r] = V::fma(V::mul(V::set1_ps(-xb[r]->d), wdmin), V::cvt(m), acc[g][r]);
        }
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    if (valid[g] == 0) continue;
    for (int r = 0; r < R; ++r) V::store(out(g, r), acc[g][r], valid[g]);
  }
}

// Rows of one tile of G units, R rows at a time and the rest (tiles of 2 and 1 rows), over super-blocks
// [b_begin, b_end).
template <class V, WeightType T, int G, int R, bool kExpanded>
void unit_rows(const uint8_t* w, size_t group_bytes, int64_t b_begin, int64_t b_end,
               int64_t rows, int64_t u0, const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy,
               const uint8_t* expanded) {
  int64_t r = 0;
  for (; r + R <= n_rows; r += R)
    tile<V, T, G, R, kExpanded>(w, group_bytes, b_begin, b_end, rows, u0, x, x_row_bytes, r, y, ldy, expanded);
  if constexpr (R > 2) {
    for (; r + 2 <= n_rows; r += 2)
      tile<V, T, G, 2, kExpanded>(w, group_bytes, b_begin, b_end, rows, u0, x, x_row_bytes, r, y, ldy, expanded);
  }
  if constexpr (R > 1) {
    for (; r < n_rows; ++r)
      tile<V, T, G, 1, kExpanded>(w, group_bytes, b_begin, b_end, rows, u0, x, x_row_bytes, r, y, ldy, expanded);
  }
}

// The scratch of unpacked levels a unit tile fills and its row tiles re-read: a whole 4096-wide row of a
// 32-row AVX-512 tile, from L2. Smaller fills cut every activation row into short pieces, one a fill,
// which the hardware prefetcher follows badly (avx512 Q4_K 4096x4096/512 was slower with 24 KB than
// without unpacking ahead at all).
constexpr size_t kExpandScratchBytes = 128 * 1024;

// This thread's scratch, made at its first large batch and kept: on the heap, since a program that
// embeds the engine may run it on a thread with a small stack.
inline uint8_t* expand_scratch() {
  constexpr size_t kAlign = 64;
  thread_local std::unique_ptr<uint8_t[]> storage(new uint8_t[kExpandScratchBytes + kAlign]);
  const auto at = reinterpret_cast<uintptr_t>(storage.get());
  return storage.get() + ((kAlign - at % kAlign) % kAlign);
}

// A unit tile's rows with its levels unpacked a scratch fill (as many super-blocks as fit) at a time.
template <class V, WeightType T, int G, int R>
void expanded_unit_rows(const uint8_t* w, size_t group_bytes, int64_t nsb, int64_t rows,
                        int64_t u0, const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  constexpr size_t kTileBytes = G * kExpandedSuperBlockBytes<V>;
  constexpr const KQuantPackedLayout& lay = kKQuantPackedLayout<T>;
  constexpr int64_t kSuperBlocks = kExpandScratchBytes / kTileBytes > 0 ? kExpandScratchBytes / kTileBytes : 1;
  uint8_t* const scratch = expand_scratch();
  Unit<V> u[G];
  units_at<V, G>(w, group_bytes, u0, u);
  int lane0[G];
  for (int g = 0; g < G; ++g) lane0[g] = u[g].lane0;
  for (int64_t b0 = 0; b0 < nsb; b0 += kSuperBlocks) {
    const int64_t b1 = std::min(nsb, b0 + kSuperBlocks);
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* sb[G];
      for (int g = 0; g < G; ++g) {
        sb[g] = u[g].group + b * lay.super_block_bytes;
        prefetch_ahead(u[g].lane0, sb[g], lay);  // batched decode reads the weights from memory here, once
      }
      expand_levels<V, T, G>(sb, lane0, lay, scratch + static_cast<size_t>(b - b0) * kTileBytes);
    }
    unit_rows<V, T, G, R, true>(w, group_bytes, b0, b1, rows, u0, x, x_row_bytes, n_rows, y, ldy, scratch);
  }
}

// The GEMM: units of the groups [g_begin, g_end), kDecodeUnits of them per tile for a single row (more
// weight loads in flight), kBatchUnits x kBatchRows tiles for batches.
template <class V, WeightType T, int kDecodeUnits, int kBatchUnits, int kBatchRows>
void gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
          size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  constexpr int kUnits = kPackRows / V::kLanes;
  const size_t group_bytes = k_quant_packed_group_bytes(T, cols);
  const int64_t nsb = cols / kQK_K;
  const int64_t u_end = g_end * kUnits;
  int64_t u = g_begin * kUnits;
  if (n_rows == 1) {
    for (; u + kDecodeUnits <= u_end; u += kDecodeUnits)
      tile<V, T, kDecodeUnits, 1, false>(w, group_bytes, 0, nsb, rows, u, x, x_row_bytes, 0, y, ldy, nullptr);
    for (; u < u_end; ++u) tile<V, T, 1, 1, false>(w, group_bytes, 0, nsb, rows, u, x, x_row_bytes, 0, y, ldy, nullptr);
    return;
  }
  if (n_rows >= kPackedKQuantExpandFromRows) {
    for (; u + kBatchUnits <= u_end; u += kBatchUnits)
      expanded_unit_rows<V, T, kBatchUnits, kBatchRows>(w, group_bytes, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy);
    for (; u < u_end; ++u)
      expanded_unit_rows<V, T, 1, kBatchRows>(w, group_bytes, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy);
    return;
  }
  for (; u + kBatchUnits <= u_end; u += kBatchUnits)
    unit_rows<V, T, kBatchUnits, kBatchRows, false>(w, group_bytes, 0, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy, nullptr);
  for (; u < u_end; ++u)
    unit_rows<V, T, 1, kBatchRows, false>(w, group_bytes, 0, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy, nullptr);
}

}  // namespace packed_k
}  // namespace
}  // namespace glacier::kernels
