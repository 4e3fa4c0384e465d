// F16 and BF16 weight matrices repacked at load for a broadcast GEMM: 16 rows a group stored column by
// column, so one vector load feeds 16 outputs while each activation element is broadcast. Every output is
// one float sum over k in order, sum = fma(w[k], x[k], sum) from k = 0, whatever the batch, the tile or the
// thread split, and on every variant (the scalar twin is that loop).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_gemm.h"

namespace glacier::kernels {

bool packable_float(WeightType t);  // F16, BF16

// Whether the loader packs F16 and BF16 matrices on this tier: the AVX2 tiers, where the broadcast GEMM
// measured 1.1-1.4x the row-dot tiles of x86/float_gemm.h at 512 rows and its GEMV streamed 15-20% faster
// (Zen 3, benchmarks/RESULTS.md). The AVX-512 tiers keep their row-dot tiles (measured there, not this),
// and the reference tier its double-precision dots. Any tier runs a packed matrix it is handed (the
// AVX-512 ones with the AVX2 code).
bool packs_float_weights(Isa isa);

// Layout of one group (rows 16g .. 16g+15; rows past the matrix are zero): for each k in 0..cols-1, the
// 16 rows' elements k side by side (32 bytes), padded to a multiple of 64 bytes.
size_t float_packed_group_bytes(int64_t cols);
void pack_float_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end);

// Activations for packed float weights: every element rounded to the weight type, as the unpacked
// kernels' f16 and bf16 activation rows hold it, widened back exactly, and laid out in the order the
// GEMM's register tiles read them, so that no GEMM call (each thread's, each chunk's) packs them again:
// - blocks of kFloatRowBlock rows, the block of row r0 at r0 * cols floats;
// - within a block of R rows, spans of kFloatSpan columns, the span of column k0 at k0 * R;
// - within a span of len columns, the block's register tiles (FloatRowTiles), tile t at first(t) * len,
//   holding element (r, k) of its rows at k * rows(t) + r.
// One row is therefore a plain row, and the rows of whole blocks can be prepared apart (a piece of a larger
// batch starts on a multiple of kFloatRowBlock: matmul.h's prepared_row_granule).
constexpr int64_t kFloatRowBlock = 96;  // rows a block: 192 KB of a span's tiles, in L2
constexpr int64_t kFloatSpan = 512;     // k a span: a group's span (16 KB of f16) stays in L1 over the tiles
constexpr int kFloatTileRows = 6;       // rows a register tile at most (AVX2: 12 of the 16 ymm accumulate)

// A block's rows split into register tiles as evenly as kFloatTileRows allows (32 rows: four of 5 and two
// of 6, not five of 6 and one of 2, whose 4 fma chains would wait on the FMA latency).
struct FloatRowTiles {
  int64_t count, base, extra;
  explicit FloatRowTiles(int64_t rows)
      : count((rows + kFloatTileRows - 1) / kFloatTileRows), base(rows / count), extra(rows % count) {}
  int rows(int64_t t) const { return static_cast<int>(base + (t < extra)); }
  int64_t first(int64_t t) const { return t * base + std::min(t, extra); }
};

// The float index of element (r, k) of n_rows x cols prepared activations (the layout above).
int64_t float_packed_activation_index(int64_t n_rows, int64_t cols, int64_t r, int64_t k);

size_t float_packed_activation_row_bytes(int64_t cols);
// x: n_rows rows of cols floats, ldx apart; dst: n_rows x cols floats in the layout above.
void prepare_float_packed_rows(WeightType t, const float* x, int64_t n_rows, int64_t cols, int64_t ldx, float* dst);

// The packed GEMM of a variant (PackedGemmFn over those prepared activations; x_row_bytes is cols floats).
PackedGemmFn packed_float_gemm(Isa isa, WeightType t);

GLACIER_PACKED_GEMM(packed_gemm_f16_ref);
GLACIER_PACKED_GEMM(packed_gemm_bf16_ref);
GLACIER_PACKED_GEMM(packed_gemm_f16_avx2);
GLACIER_PACKED_GEMM(packed_gemm_bf16_avx2);

}  // namespace glacier::kernels
