// The packed K-quant GEMM (packed_k_quant.h) written once over a vector width: included by
// packed_k_quant_avx2.cpp (8 rows a vector, a group as two units) and packed_k_quant_avx512.cpp (16 rows,
// a group as one unit), each with a traits struct V of its instructions. Per super-block and output the
// integer lane q is the sum over sub-blocks of scale * (levels . q8 over quad q). Q4_K/Q5_K: two maddubs
// (unsigned levels, the signed permuted q8 broadcast) add up to the int16 pair (quad dot of sub-block 2c,
// of 2c + 1), scaled by one multiply-add of int16 pairs (dpwssd with VNNI); Q6_K: maddubs minus the 32
// offset's (or, on AVX2 batches, the signed level by the sign trick), times the sub-block's scale. Exact:
// no int16 sum passes 4 * 63 * 127. The floats then follow
// ref/dot_k_quant_ref.cpp operation for operation.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/packed_k_quant.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {
namespace packed_k {

constexpr int kQuadBytes = 4;
constexpr int kVector = kPackRows * kQuadBytes;

inline int32_t pair16(int32_t lo, int32_t hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) | (static_cast<uint32_t>(lo) & 0xffffu));
}

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

// Levels of chunk c (0..3) of a Q4_K/Q5_K unit for quad q: low nibbles (elements 4q, 4q + 1 of sub-blocks
// 2c and 2c + 1), high nibbles (elements 4q + 2, 4q + 3 of each), with the fifth bit for Q5_K.
template <class V, bool kQh>
inline void k4_levels(const uint8_t* sb, const KQuantPackedLayout& lay, int lane0, int c, int q,
                      typename V::I& lo, typename V::I& hi) {
  using I = typename V::I;
  const I m4 = V::set1_8(0x0f);
  const I raw = V::load(sb + lay.qs + (c * 8 + q) * kVector + lane0 * kQuadBytes);
  lo = V::and_(raw, m4);
  hi = V::and_(V::template srli16<4>(raw), m4);
  if constexpr (kQh) {
    // Bit s of each qh byte to bit 4: 16-bit shifts act per byte here, as only one bit a byte is kept.
    const I hb = V::load(sb + lay.qh + q * kVector + lane0 * kQuadBytes);
    const I bit4 = V::set1_8(0x10);
    const int s_lo = 2 * c, s_hi = 2 * c + 1;
    const I b_lo = s_lo <= 4 ? V::sll16(hb, 4 - s_lo) : V::srl16(hb, s_lo - 4);
    const I b_hi = s_hi <= 4 ? V::sll16(hb, 4 - s_hi) : V::srl16(hb, s_hi - 4);
    lo = V::or_(lo, V::and_(b_lo, bit4));
    hi = V::or_(hi, V::and_(b_hi, bit4));
  }
}

// Q6_K's products in a tile of R activation rows: where the ISA has a byte sign instruction (AVX2's vpsignb;
// AVX-512 has none) and R >= 4, the signed level times q8 through the sign trick, two ops a level vector
// shared by the rows against one a row for the offset's own maddubs and subtraction; exact because q8 is
// never -128 (quantize_row_q8_k) and |level| <= 32. Fewer rows do not repay the two ops. One thread of the
// Zen 5 VM forced to avx2, 4096 x 4096 x 512: 2-3% faster in 5 of 6 alternating rounds (ALU counts said 10%).
template <class V, int R>
constexpr bool kSignedLevels = V::kHasByteSign && R >= 4;

// Super-blocks ahead that a tile prefetches while it streams a group from memory: the hardware prefetcher
// alone left one thread's decode GEMV at about half the read loop's rate (the quad vectors are read 512
// bytes apart, the scales at the end of the super-block first). Two super-blocks (4.6 KB of Q4_K, 6.6 KB
// of Q6_K) ahead: one thread of the Zen 5 VM forced to avx2 went from 16.5 to 29 GB/s (Q4_K) and from
// 17.5 to 24 GB/s (Q6_K) of weights a CPU second (bench_kernels packed/avx2/*/65536x4096/1); 4 measured alike.
constexpr int64_t kPrefetchSuperBlocks = 2;
constexpr size_t kCacheLine = 64;

// Brings a whole super-block (every unit's lanes) towards L1. Prefetches past the matrix's end are
// harmless (no fault), so the last super-blocks need no test.
inline void prefetch_super_block(const uint8_t* sb, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kCacheLine) __builtin_prefetch(sb + off, 0, 3);
}

// Units [u0, u0 + G) x activation rows [r0, r0 + R).
template <class V, WeightType T, int G, int R>
void tile(const uint8_t* w, size_t group_bytes, const KQuantPackedLayout& lay, int64_t nsb, int64_t rows, int64_t u0,
          const uint8_t* x, size_t x_row_bytes, int64_t r0, float* y, int64_t ldy) {
  using I = typename V::I;
  using F = typename V::F;
  constexpr bool kK4 = T != WeightType::Q6_K;
  Unit<V> u[G];
  units_at<V, G>(w, group_bytes, u0, u);
  const BlockQ8_K* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = reinterpret_cast<const BlockQ8_K*>(x + (r0 + r) * x_row_bytes);
  F acc[G][R][8], acc_m[G][R][4];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) {
      for (F& a : acc[g][r]) a = V::zero_ps();
      for (F& a : acc_m[g][r]) a = V::zero_ps();
    }
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb[G];
    for (int g = 0; g < G; ++g) {
      sb[g] = u[g].group + b * lay.super_block_bytes;
      // The group's first unit fetches for all of its units (they share every cache line); batches
      // re-read it from the caches, where a prefetch costs a load slot and no more.
      if (u[g].lane0 == 0) prefetch_super_block(sb[g] + kPrefetchSuperBlocks * lay.super_block_bytes, lay.super_block_bytes);
    }
    const BlockQ8_K* xb[R];
    for (int r = 0; r < R; ++r) xb[r] = xr[r] + b;
    F d[G][R];
    for (int g = 0; g < G; ++g) {
      const F wd = V::load_ph(reinterpret_cast<const uint16_t*>(sb[g] + lay.d) + u[g].lane0);
      for (int r = 0; r < R; ++r) d[g][r] = V::mul(V::set1_ps(xb[r]->d), wd);
    }
    if constexpr (kK4) {
      // The mins term: lane k of dot_k_quant_ref's mins_lanes, one madd of (min 2k, min 2k + 1) pairs
      // against the (sum of sub-block 2k, sum of 2k + 1) pair of the activation row.
      I sums[R][4];
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < 4; ++k) {
          const int16_t* bs = xb[r]->bsums + 4 * k;
          sums[r][k] = V::set1_32(pair16(int32_t{bs[0]} + bs[1], int32_t{bs[2]} + bs[3]));
        }
      for (int g = 0; g < G; ++g) {
        const F wdmin = V::load_ph(reinterpret_cast<const uint16_t*>(sb[g] + lay.dmin) + u[g].lane0);
        I mins[4];
        for (int k = 0; k < 4; ++k) mins[k] = V::widen_u8_16(sb[g] + lay.mins + k * 2 * kPackRows + 2 * u[g].lane0);
        for (int r = 0; r < R; ++r) {
          const F dmin = V::mul(V::set1_ps(-xb[r]->d), wdmin);
          I m[4];
          for (int k = 0; k < 4; ++k) m[k] = V::madd(mins[k], sums[r][k]);
          if constexpr (T == WeightType::Q5_K) {  // one scalar accumulator: the four lanes summed first
            acc_m[g][r][0] = V::fma(dmin, V::cvt(V::add32(V::add32(m[0], m[1]), V::add32(m[2], m[3]))), acc_m[g][r][0]);
          } else {
            for (int k = 0; k < 4; ++k) acc_m[g][r][k] = V::fma(dmin, V::cvt(m[k]), acc_m[g][r][k]);
          }
        }
      }
    }
    // Q4_K/Q5_K: the scales of sub-blocks 2c and 2c + 1 as the int16 pair of the row's lane; Q6_K: each
    // sub-block's scale in both halves.
    constexpr int kScaleVectors = kK4 ? 4 : 16;
    I scale[G][kScaleVectors];
    for (int g = 0; g < G; ++g)
      for (int s = 0; s < kScaleVectors; ++s) {
        if constexpr (kK4) {
          scale[g][s] = V::widen_u8_16(sb[g] + lay.scales + s * 2 * kPackRows + 2 * u[g].lane0);
        } else {
          scale[g][s] = V::scale_pairs_i8(sb[g] + lay.scales + s * kPackRows + u[g].lane0);
        }
      }
    for (int q = 0; q < 8; ++q) {
      I lanes[G][R];
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) lanes[g][r] = V::zero();
      if constexpr (kK4) {
        for (int c = 0; c < 4; ++c) {
          I lo[G], hi[G];
          for (int g = 0; g < G; ++g) k4_levels<V, T == WeightType::Q5_K>(sb[g], lay, u[g].lane0, c, q, lo[g], hi[g]);
          for (int r = 0; r < R; ++r) {
            // Activations permuted to match (packed_k_quant.h): the int16 pair of a lane is then (the quad
            // dot of sub-block 2c, that of 2c + 1), both scaled by one multiply-add.
            const int8_t* xq = xb[r]->qs + 64 * c + 2 * kQuadBytes * q;
            const I x1 = V::bcast32(xq), x2 = V::bcast32(xq + kQuadBytes);
            for (int g = 0; g < G; ++g)
              lanes[g][r] = V::dot16(lanes[g][r], V::add16(V::maddubs(lo[g], x1), V::maddubs(hi[g], x2)), scale[g][c]);
          }
        }
      } else {
        const I m4 = V::set1_8(0x0f), m30 = V::set1_8(0x30), offset = V::set1_8(32);
        for (int h = 0; h < 2; ++h) {
          I lv[G][4];
          for (int g = 0; g < G; ++g) {
            const size_t lane_bytes = u[g].lane0 * kQuadBytes;
            const I a = V::load(sb[g] + lay.qs + ((2 * h) * 8 + q) * kVector + lane_bytes);
            const I bq = V::load(sb[g] + lay.qs + ((2 * h + 1) * 8 + q) * kVector + lane_bytes);
            const I hb = V::load(sb[g] + lay.qh + (h * 8 + q) * kVector + lane_bytes);
            lv[g][0] = V::or_(V::and_(a, m4), V::and_(V::template slli16<4>(hb), m30));
            lv[g][1] = V::or_(V::and_(bq, m4), V::and_(V::template slli16<2>(hb), m30));
            lv[g][2] = V::or_(V::and_(V::template srli16<4>(a), m4), V::and_(hb, m30));
            lv[g][3] = V::or_(V::and_(V::template srli16<4>(bq), m4), V::and_(V::template srli16<2>(hb), m30));
          }
          for (int k = 0; k < 4; ++k) {
            const int c = 4 * h + k;
            if constexpr (kSignedLevels<V, R>) {
              // The signed level s = stored - 32 as |s| against q8 with s's sign: the same exact int16 pairs.
              I magnitude[G], level[G];
              for (int g = 0; g < G; ++g) {
                level[g] = V::sub8(lv[g][k], offset);
                magnitude[g] = V::abs8(level[g]);
              }
              for (int r = 0; r < R; ++r) {
                const I xq = V::bcast32(xb[r]->qs + 32 * c + kQuadBytes * q);
                for (int g = 0; g < G; ++g)
                  lanes[g][r] = V::dot16(lanes[g][r], V::maddubs(magnitude[g], V::sign8(xq, level[g])), scale[g][2 * c + q / 4]);
              }
            } else {
              for (int r = 0; r < R; ++r) {
                const I xq = V::bcast32(xb[r]->qs + 32 * c + kQuadBytes * q);
                const I off = V::maddubs(offset, xq);  // the 32 the stored levels carry, times q8
                for (int g = 0; g < G; ++g)
                  lanes[g][r] = V::dot16(lanes[g][r], V::sub16(V::maddubs(lv[g][k], xq), off), scale[g][2 * c + q / 4]);
              }
            }
          }
        }
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) acc[g][r][q] = V::fma(d[g][r], V::cvt(lanes[g][r]), acc[g][r][q]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t first = (u[g].group - w) / static_cast<int64_t>(group_bytes) * kPackRows + u[g].lane0;
    const int64_t left = rows - first;
    const int valid = left < V::kLanes ? static_cast<int>(left) : V::kLanes;
    if (valid <= 0) continue;
    for (int r = 0; r < R; ++r) {
      const F* a = acc[g][r];
      // dot_ref.cpp's hsum8 tree lane by lane, then the mins as the row dots add them.
      F out = V::add(V::add(V::add(a[4], a[0]), V::add(a[6], a[2])), V::add(V::add(a[5], a[1]), V::add(a[7], a[3])));
      if constexpr (T == WeightType::Q4_K) {
        const F* m = acc_m[g][r];
        out = V::add(out, V::add(V::add(m[0], m[2]), V::add(m[1], m[3])));
      } else if constexpr (T == WeightType::Q5_K) {
        out = V::add(out, acc_m[g][r][0]);
      }
      V::store(y + (r0 + r) * ldy + first, out, valid);
    }
  }
}

// Rows of one tile of G units, R rows at a time and the rest (tiles of 2 and 1 rows).
template <class V, WeightType T, int G, int R>
void unit_rows(const uint8_t* w, size_t group_bytes, const KQuantPackedLayout& lay, int64_t nsb, int64_t rows,
               int64_t u0, const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) tile<V, T, G, R>(w, group_bytes, lay, nsb, rows, u0, x, x_row_bytes, r, y, ldy);
  if constexpr (R > 2) {
    for (; r + 2 <= n_rows; r += 2) tile<V, T, G, 2>(w, group_bytes, lay, nsb, rows, u0, x, x_row_bytes, r, y, ldy);
  }
  if constexpr (R > 1) {
    for (; r < n_rows; ++r) tile<V, T, G, 1>(w, group_bytes, lay, nsb, rows, u0, x, x_row_bytes, r, y, ldy);
  }
}

// The GEMM: units of the groups [g_begin, g_end), kDecodeUnits of them per tile for a single row (more
// weight loads in flight), kBatchUnits x kBatchRows tiles for batches.
template <class V, WeightType T, int kDecodeUnits, int kBatchUnits, int kBatchRows>
void gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
          size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  constexpr int kUnits = kPackRows / V::kLanes;
  const KQuantPackedLayout lay = k_quant_packed_layout(T);
  const size_t group_bytes = k_quant_packed_group_bytes(T, cols);
  const int64_t nsb = cols / kQK_K;
  const int64_t u_end = g_end * kUnits;
  int64_t u = g_begin * kUnits;
  if (n_rows == 1) {
    for (; u + kDecodeUnits <= u_end; u += kDecodeUnits)
      tile<V, T, kDecodeUnits, 1>(w, group_bytes, lay, nsb, rows, u, x, x_row_bytes, 0, y, ldy);
    for (; u < u_end; ++u) tile<V, T, 1, 1>(w, group_bytes, lay, nsb, rows, u, x, x_row_bytes, 0, y, ldy);
    return;
  }
  for (; u + kBatchUnits <= u_end; u += kBatchUnits)
    unit_rows<V, T, kBatchUnits, kBatchRows>(w, group_bytes, lay, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy);
  for (; u < u_end; ++u) unit_rows<V, T, 1, kBatchRows>(w, group_bytes, lay, nsb, rows, u, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace packed_k
}  // namespace
}  // namespace glacier::kernels
