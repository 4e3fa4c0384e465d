// Packing of Q4_K/Q5_K/Q6_K matrices into 16-row groups (layout in packed_k_quant.h) and the choice of
// the packed K-quant GEMM per kernel variant. Pure data movement: the same bytes whichever ISA runs.
#include "kernels/packed_k_quant.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/k_quant_layout.h"
#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = kKQuantQuadBytes;
constexpr size_t kVector = kKQuantQuadVector;
constexpr int kQuadsPerChunk = 32 / kQuadBytes;    // quads of a 32-element chunk (and of a 32-byte segment)

template <class Block>
const Block* row_blocks(const Matrix& m, int64_t row) {
  return row < m.rows ? reinterpret_cast<const Block*>(static_cast<const uint8_t*>(m.data) + row * m.row_bytes)
                      : nullptr;
}

// Q4_K and Q5_K: one super-block b of group g. Byte t of quad q of sub-block s holds in its low nibble
// element 32s + 4q + t and in its high nibble element 32s + 16 + 4q + t; bit s of qh vector (h, q), byte
// t, is the fifth bit of element 32s + 16h + 4q + t.
template <class Block, int (*Level)(const Block&, int)>
void pack_k4_super_block(const Matrix& m, int64_t g, int64_t b, const KQuantPackedLayout& lay, uint8_t* out) {
  constexpr bool kHasQh = std::is_same_v<Block, BlockQ5_K>;
  for (int l = 0; l < kPackRows; ++l) {
    const Block* row = row_blocks<Block>(m, g * kPackRows + l);
    if (!row) continue;  // all zero: levels, scales, mins and both factors
    const Block& blk = row[b];
    for (int s = 0; s < 8; ++s)
      for (int q = 0; q < kK4QuadsPerSubBlock; ++q)
        for (int t = 0; t < kQuadBytes; ++t) {
          const size_t byte = l * kQuadBytes + t;
          const int first = 32 * s + kQuadBytes * q + t;  // natural index of the low nibble's element
          const int low = Level(blk, first), high = Level(blk, first + 16);
          out[lay.qs + (s * kK4QuadsPerSubBlock + q) * kVector + byte] = static_cast<uint8_t>((low & 0x0f) | ((high & 0x0f) << 4));
          if constexpr (kHasQh) {
            out[lay.qh + q * kVector + byte] |= static_cast<uint8_t>((low >> 4) << s);
            out[lay.qh + (kK4QuadsPerSubBlock + q) * kVector + byte] |= static_cast<uint8_t>((high >> 4) << s);
          }
        }
    for (int s = 0; s < 8; ++s) {
      int scale, min;
      k4_scale_min(blk.scales, s, scale, min);
      out[lay.scales + s * kPackRows + l] = static_cast<uint8_t>(scale);
      out[lay.mins + (s / 2) * 2 * kPackRows + 2 * l + s % 2] = static_cast<uint8_t>(min);
    }
    reinterpret_cast<uint16_t*>(out + lay.d)[l] = blk.d;
    reinterpret_cast<uint16_t*>(out + lay.dmin)[l] = blk.dmin;
  }
}

// Q6_K: one super-block b of group g, as the layout in packed_k_quant.h says.
void pack_q6_k_super_block(const Matrix& m, int64_t g, int64_t b, const KQuantPackedLayout& lay, uint8_t* out) {
  for (int l = 0; l < kPackRows; ++l) {
    const BlockQ6_K* row = row_blocks<BlockQ6_K>(m, g * kPackRows + l);
    if (!row) continue;  // all zero: levels, scales and d
    const BlockQ6_K& blk = row[b];
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < kQuadsPerChunk; ++q)
        for (int t = 0; t < kQuadBytes; ++t) {
          int u[4];  // the stored levels + 32 of the four chunks
          for (int k = 0; k < 4; ++k) u[k] = q6_k_level(blk, 128 * h + 32 * k + kQuadBytes * q + t) + 32;
          for (int j = 0; j < 3; ++j)
            out[lay.qs + ((h * 3 + j) * kQuadsPerChunk + q) * kVector + l * kQuadBytes + t] =
                static_cast<uint8_t>(u[j] | (((u[3] >> (2 * j)) & 3) << 6));
        }
    for (int s = 0; s < 16; ++s) out[lay.scales + s * kPackRows + l] = static_cast<uint8_t>(blk.scales[s]);
    reinterpret_cast<uint16_t*>(out + lay.d)[l] = blk.d;
  }
}

}  // namespace

bool packable_k_quant(WeightType t) { return t == WeightType::Q4_K || t == WeightType::Q5_K || t == WeightType::Q6_K; }

KQuantPackedLayout k_quant_packed_layout(WeightType t) {
  switch (t) {
    case WeightType::Q4_K: return kKQuantPackedLayout<WeightType::Q4_K>;
    case WeightType::Q5_K: return kKQuantPackedLayout<WeightType::Q5_K>;
    case WeightType::Q6_K: return kKQuantPackedLayout<WeightType::Q6_K>;
    default: break;
  }
  GLACIER_ASSERT(false, std::string("no packed K-quant layout for ") + weight_type_name(t));
  return {};
}

size_t k_quant_packed_group_bytes(WeightType t, int64_t cols) {
  GLACIER_ASSERT(cols % kQK_K == 0, "packed K-quant matrices need cols a multiple of 256");
  return static_cast<size_t>(cols / kQK_K) * k_quant_packed_layout(t).super_block_bytes;
}

void pack_k_quant_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end) {
  GLACIER_ASSERT(packable_k_quant(m.type) && m.data, "packing a Q4_K, Q5_K or Q6_K matrix with data");
  GLACIER_ASSERT(0 <= g_begin && g_begin <= g_end && g_end <= packed_groups(m.rows), "group range in the matrix");
  const KQuantPackedLayout lay = k_quant_packed_layout(m.type);
  static_assert(kPackAlign == 64);
  GLACIER_ASSERT(lay.super_block_bytes % kPackAlign == 0, "packed super-blocks keep 64-byte alignment");
  const size_t group_bytes = k_quant_packed_group_bytes(m.type, m.cols);
  const int64_t nsb = m.cols / kQK_K;
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(group, 0, group_bytes);
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* out = group + static_cast<size_t>(b) * lay.super_block_bytes;
      switch (m.type) {
        case WeightType::Q4_K: pack_k4_super_block<BlockQ4_K, q4_k_level>(m, g, b, lay, out); break;
        case WeightType::Q5_K: pack_k4_super_block<BlockQ5_K, q5_k_level>(m, g, b, lay, out); break;
        default: pack_q6_k_super_block(m, g, b, lay, out); break;
      }
    }
  }
}

PackedGemmFn packed_k_quant_gemm(Isa isa, WeightType t) {
  GLACIER_ASSERT(packable_k_quant(t), std::string("no packed K-quant GEMM for ") + weight_type_name(t));
  const int k = t == WeightType::Q4_K ? 0 : t == WeightType::Q5_K ? 1 : 2;
  static constexpr PackedGemmFn kRef[] = {packed_gemm_q4_k_ref, packed_gemm_q5_k_ref, packed_gemm_q6_k_ref};
  static constexpr PackedGemmFn kAvx2[] = {packed_gemm_q4_k_avx2, packed_gemm_q5_k_avx2, packed_gemm_q6_k_avx2};
  static constexpr PackedGemmFn kAvx2Vnni[] = {packed_gemm_q4_k_avx2_vnni, packed_gemm_q5_k_avx2_vnni,
                                               packed_gemm_q6_k_avx2_vnni};
  static constexpr PackedGemmFn kAvx512NoVnni[] = {packed_gemm_q4_k_avx512_novnni, packed_gemm_q5_k_avx512_novnni,
                                                   packed_gemm_q6_k_avx512_novnni};
  static constexpr PackedGemmFn kAvx512[] = {packed_gemm_q4_k_avx512, packed_gemm_q5_k_avx512, packed_gemm_q6_k_avx512};
  switch (isa) {
    case Isa::Ref: return kRef[k];
    case Isa::Avx2: return kAvx2[k];
    case Isa::Avx2Vnni: return kAvx2Vnni[k];
    case Isa::Avx512NoVnni: return kAvx512NoVnni[k];
    case Isa::Avx512NoBf16:
    case Isa::Avx512: return kAvx512[k];  // the VNNI build serves both (it uses no BF16)
  }
  GLACIER_ASSERT(false, "unknown kernel variant");
  return nullptr;
}

}  // namespace glacier::kernels
