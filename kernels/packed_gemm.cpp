// Packing of Q8_0/Q4_0 matrices into 16-row groups and of activation rows into the matching form
// (layouts in packed_gemm.h). Pure data movement: the same bytes whichever ISA runs the GEMM.
#include "kernels/packed_gemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/packed_float.h"
#include "kernels/packed_k_quant.h"
#include "util/error.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = 4;                       // bytes of one row in one 32-bit lane
constexpr int kQ8Offset = 128;                      // Q8_0: activations (lane order) or weights (block sums) + 128
constexpr int kQ4Offset = 8;                        // Q4_0 nibbles u hold the value u - 8
constexpr size_t kLaneBytes = kPackRows * kQuadBytes;  // one zmm: a quad of each of the 16 rows

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Group g's kPackRows rows of one 32-element block type: each block's quant bytes quad by quad (row l's
// quad j at j * kLaneBytes + l * kQuadBytes), each stored plus `offset`, then the fp16 scales (row l of
// block b at b * kPackRows + l). Rows past the matrix pad the group with `blank` bytes and scale 0.
template <class Block>
void pack_group(const Matrix& m, int64_t g, uint8_t offset, uint8_t blank, uint8_t* out) {
  constexpr int kQuads = sizeof(Block::qs) / kQuadBytes;
  const int64_t nb = m.cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(m.type);
  auto* scales = reinterpret_cast<uint16_t*>(out + nb * quad_bytes);
  for (int l = 0; l < kPackRows; ++l) {
    const int64_t row = g * kPackRows + l;
    const bool real = row < m.rows;
    const auto* blocks = real ? reinterpret_cast<const Block*>(static_cast<const uint8_t*>(m.data) + row * m.row_bytes)
                              : nullptr;
    for (int64_t b = 0; b < nb; ++b) {
      scales[b * kPackRows + l] = real ? blocks[b].d : 0;
      uint8_t* block_out = out + b * quad_bytes;
      for (int q = 0; q < kQuads; ++q)
        for (int k = 0; k < kQuadBytes; ++k)
          block_out[q * kLaneBytes + l * kQuadBytes + k] =
              real ? static_cast<uint8_t>(static_cast<uint8_t>(blocks[b].qs[q * kQuadBytes + k]) + offset) : blank;
    }
  }
}

}  // namespace

bool packable(WeightType t) {
  return t == WeightType::Q8_0 || t == WeightType::Q4_0 || packable_k_quant(t) ||
         (packable_float(t) && packs_float_weights(active_isa()));
}

size_t packed_block_quad_bytes(WeightType t) {
  GLACIER_ASSERT(t == WeightType::Q8_0 || t == WeightType::Q4_0, std::string("no packed quads for ") + weight_type_name(t));
  return t == WeightType::Q8_0 ? kQK8_0 * kPackRows : kQK4_0 / 2 * kPackRows;
}

size_t packed_group_bytes(WeightType t, int64_t cols) {
  GLACIER_ASSERT(cols % kQK8_0 == 0, "packed matrices need cols a multiple of 32");
  const size_t nb = static_cast<size_t>(cols / kQK8_0);
  return round_up(nb * (packed_block_quad_bytes(t) + kPackRows * sizeof(uint16_t)), kPackAlign);
}

size_t packed_bytes(const Matrix& m) {
  const size_t group_bytes = packable_k_quant(m.type) ? k_quant_packed_group_bytes(m.type, m.cols)
                             : packable_float(m.type)  ? float_packed_group_bytes(m.cols)
                                                       : packed_group_bytes(m.type, m.cols);
  return static_cast<size_t>(packed_groups(m.rows)) * group_bytes;
}

void pack_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end) {
  if (packable_k_quant(m.type)) return pack_k_quant_groups(m, dst, g_begin, g_end);
  if (packable_float(m.type)) return pack_float_groups(m, dst, g_begin, g_end);
  GLACIER_ASSERT(packable(m.type) && m.data, "packing a Q8_0 or Q4_0 matrix with data");
  GLACIER_ASSERT(0 <= g_begin && g_begin <= g_end && g_end <= packed_groups(m.rows), "group range in the matrix");
  const size_t group_bytes = packed_group_bytes(m.type, m.cols);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* out = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(out, 0, group_bytes);  // the padding after the scales, too
    if (m.type == WeightType::Q8_0) {
      // Lane order keeps the file's signed bytes; block-sum order stores w + 128 (packed_gemm.h), 128 for 0.
      const uint8_t offset = m.block_sum_order ? kQ8Offset : 0;
      pack_group<BlockQ8_0>(m, g, offset, offset, out);
    } else {
      constexpr uint8_t kZeroNibbles = kQ4Offset | (kQ4Offset << 4);  // value 0 in both nibbles
      pack_group<BlockQ4_0>(m, g, 0, kZeroNibbles, out);
    }
  }
}

size_t packed_activation_row_bytes(int64_t cols) {
  const size_t nb = static_cast<size_t>(cols / kQK8_0);
  return round_up(nb * (kQK8_0 + sizeof(float) + (1 + kQuadsPerBlock) * sizeof(int32_t)), kPackAlign);
}

void prepare_packed_row(const Matrix& w, const float* x, uint8_t* dst) {
  const int64_t cols = w.cols, nb = cols / kQK8_0;
  // Lane-order Q8_0 puts the offset on the activations instead (unsigned x + 128, no corrections).
  const bool unsigned_quants = w.type == WeightType::Q8_0 && !w.block_sum_order;
  const int32_t offset = w.type == WeightType::Q8_0 ? kQ8Offset : kQ4Offset;
  const DotKernels& k = active_kernels();
  for (int64_t b = 0; b < nb; ++b) {
    // Quantized block by block as the unpacked path does (every variant's quantizer is bit-identical
    // to the reference), then spread over the row's three parts.
    BlockQ8_0 block;
    k.quantize_row_q8_0(x + b * kQK8_0, &block, kQK8_0);
    int32_t quad[kQuadsPerBlock] = {}, sum = 0;
    for (int e = 0; e < kQK8_0; ++e) quad[e / kQuadBytes] += block.qs[e];
    for (int32_t& q : quad) {
      sum += q;
      q *= -offset;
    }
    if (unsigned_quants) {  // the correction comes from the weights instead
      for (auto& v : block.qs) v = static_cast<int8_t>(static_cast<uint8_t>(v + kQ8Offset));
      sum = 0;
      for (int32_t& q : quad) q = 0;
    }
    const float scale = fp16_to_f32(block.d);
    const int32_t correction = -offset * sum;
    uint8_t* scales = dst + nb * kQK8_0;
    uint8_t* blocks = scales + nb * sizeof(float);
    uint8_t* quads = blocks + nb * sizeof(int32_t);
    std::memcpy(dst + b * kQK8_0, block.qs, kQK8_0);
    std::memcpy(scales + b * sizeof(float), &scale, sizeof scale);
    std::memcpy(blocks + b * sizeof(int32_t), &correction, sizeof correction);
    std::memcpy(quads + b * sizeof quad, quad, sizeof quad);
  }
}

}  // namespace glacier::kernels
