// Weight-matrix x activation-batch products on top of the active DotKernels. Batch invariance
// comes from the tile contract (each output bitwise equals its single-row dot), so neither the
// batch size nor the [o_begin, o_end) split can change a result.
#include "kernels/matmul.h"

#include <algorithm>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/packed_float.h"
#include "kernels/packed_gemm.h"
#include "kernels/packed_k_quant.h"
#include "util/error.h"

namespace glacier::kernels {

namespace {

// Elements per block of the weight type (and of the activation blocks it is multiplied with).
int64_t block_elements(WeightType t) {
  switch (t) {
    case WeightType::F32:
    case WeightType::F16:
    case WeightType::BF16: return 1;
    case WeightType::Q8_0:
    case WeightType::Q4_0:
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::IQ4_NL: return kQK8_0;
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:
    case WeightType::IQ4_XS: return kQK_K;
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return 1;
}

size_t prepared_row_bytes(WeightType t, int64_t cols) {
  switch (t) {
    case WeightType::F32: return static_cast<size_t>(cols) * sizeof(float);
    case WeightType::F16:
    case WeightType::BF16: return static_cast<size_t>(cols) * sizeof(uint16_t);
    case WeightType::Q8_0:
    case WeightType::Q4_0:
    case WeightType::Q5_0:
    case WeightType::IQ4_NL: return static_cast<size_t>(cols / kQK8_0) * sizeof(BlockQ8_0);
    case WeightType::Q4_1:
    case WeightType::Q5_1: return static_cast<size_t>(cols / kQK8_0) * sizeof(BlockQ8_1);
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:
    case WeightType::IQ4_XS: return static_cast<size_t>(cols / kQK_K) * sizeof(BlockQ8_K);
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return 0;
}

void check_cols(WeightType t, int64_t cols) {
  GLACIER_ASSERT(cols >= 0, "negative column count");
  GLACIER_ASSERT(cols % block_elements(t) == 0,
                 std::string(weight_type_name(t)) + " needs cols a multiple of " +
                     std::to_string(block_elements(t)) + ", got " + std::to_string(cols));
}

// Weight rows visited together, so a block of them stays in L2 while the batch tiles pass over it.
constexpr int64_t kWeightRowsPerBlock = 16;

}  // namespace

DotTileFn tile_for(const DotKernels& k, WeightType t, bool block_sum_order) {
  if (t == WeightType::Q8_0 && block_sum_order) return k.q8_0_q8_0_block_sums_tile;
  if (t == WeightType::Q4_0 && block_sum_order) return k.q4_0_q8_0_block_sums_tile;
  switch (t) {
    case WeightType::F32: return k.f32_f32_tile;
    case WeightType::F16: return k.f16_f16_tile;
    case WeightType::BF16: return k.bf16_bf16_tile;
    case WeightType::Q8_0: return k.q8_0_q8_0_tile;
    case WeightType::Q4_0: return k.q4_0_q8_0_tile;
    case WeightType::Q4_K: return k.q4_k_q8_k_tile;
    case WeightType::Q5_K: return k.q5_k_q8_k_tile;
    case WeightType::Q6_K: return k.q6_k_q8_k_tile;
    case WeightType::Q4_1: return k.q4_1_q8_1_tile;
    case WeightType::Q5_0: return k.q5_0_q8_0_tile;
    case WeightType::Q5_1: return k.q5_1_q8_1_tile;
    case WeightType::IQ4_NL: return k.iq4_nl_q8_0_tile;
    case WeightType::IQ4_XS: return k.iq4_xs_q8_k_tile;
    case WeightType::Q2_K: return k.q2_k_q8_k_tile;
    case WeightType::Q3_K: return k.q3_k_q8_k_tile;
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return nullptr;
}

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::F16: return "F16";
    case WeightType::BF16: return "BF16";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::Q4_0: return "Q4_0";
    case WeightType::Q4_K: return "Q4_K";
    case WeightType::Q5_K: return "Q5_K";
    case WeightType::Q6_K: return "Q6_K";
    case WeightType::Q4_1: return "Q4_1";
    case WeightType::Q5_0: return "Q5_0";
    case WeightType::Q5_1: return "Q5_1";
    case WeightType::IQ4_NL: return "IQ4_NL";
    case WeightType::IQ4_XS: return "IQ4_XS";
    case WeightType::Q2_K: return "Q2_K";
    case WeightType::Q3_K: return "Q3_K";
  }
  return "?";
}

size_t activation_bytes(WeightType t, int64_t n_rows, int64_t cols) {
  check_cols(t, cols);
  GLACIER_ASSERT(n_rows >= 0, "negative row count");
  return static_cast<size_t>(n_rows) * prepared_row_bytes(t, cols);
}

PreparedActivations prepare_activations(WeightType t, const float* x, int64_t n_rows, int64_t cols,
                                        int64_t ldx, void* storage) {
  check_cols(t, cols);
  GLACIER_ASSERT(n_rows == 0 || ldx >= cols, "activation row stride shorter than a row");
  PreparedActivations p;
  p.for_type = t;
  p.data = storage;
  p.n_rows = n_rows;
  p.cols = cols;
  p.row_bytes = prepared_row_bytes(t, cols);
  auto* out = static_cast<unsigned char*>(storage);
  const DotKernels& k = active_kernels();
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* src = x + r * ldx;
    unsigned char* dst = out + r * p.row_bytes;
    switch (t) {
      case WeightType::F32:
        std::copy(src, src + cols, reinterpret_cast<float*>(dst));
        break;
      case WeightType::F16: {
        k.f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), cols);
        break;
      }
      case WeightType::BF16: {
        auto* h = reinterpret_cast<uint16_t*>(dst);
        for (int64_t c = 0; c < cols; ++c) h[c] = f32_to_bf16(src[c]);
        break;
      }
      case WeightType::Q8_0:
      case WeightType::Q4_0:
      case WeightType::Q5_0:
      case WeightType::IQ4_NL:
        // Every variant's quantizer is bit-identical to the reference, so the ISA cannot leak in.
        k.quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), cols);
        break;
      case WeightType::Q2_K:
      case WeightType::Q3_K:
      case WeightType::Q4_K:
      case WeightType::Q5_K:
      case WeightType::Q6_K:
      case WeightType::IQ4_XS:
        k.quantize_row_q8_k(src, reinterpret_cast<BlockQ8_K*>(dst), cols);
        break;
      case WeightType::Q4_1:
      case WeightType::Q5_1:
        k.quantize_row_q8_1(src, reinterpret_cast<BlockQ8_1*>(dst), cols);
        break;
    }
  }
  return p;
}

bool preferred_block_sum_order(WeightType t, int64_t rows) {
  return t == WeightType::Q8_0 || (t == WeightType::Q4_0 && rows % 8 == 0);
}

size_t activation_bytes(const Matrix& w, int64_t n_rows) {
  // Packed K-quants take the plain Q8_K rows (packed_k_quant.h).
  if (!w.packed || packable_k_quant(w.type)) return activation_bytes(w.type, n_rows, w.cols);
  check_cols(w.type, w.cols);
  const size_t row_bytes = packable_float(w.type) ? float_packed_activation_row_bytes(w.cols)
                                                  : packed_activation_row_bytes(w.cols);
  return static_cast<size_t>(n_rows) * row_bytes;
}

PreparedActivations prepare_activations(const Matrix& w, const float* x, int64_t n_rows, int64_t ldx, void* storage) {
  if (!w.packed) return prepare_activations(w.type, x, n_rows, w.cols, ldx, storage);
  if (packable_k_quant(w.type)) {  // plain Q8_K rows (packed_k_quant.h)
    PreparedActivations p = prepare_activations(w.type, x, n_rows, w.cols, ldx, storage);
    p.packed = true;
    return p;
  }
  check_cols(w.type, w.cols);
  GLACIER_ASSERT(n_rows == 0 || ldx >= w.cols, "activation row stride shorter than a row");
  PreparedActivations p;
  p.for_type = w.type;
  p.packed = true;
  p.data = storage;
  p.n_rows = n_rows;
  p.cols = w.cols;
  if (packable_float(w.type)) {  // float rows rounded to the weight type (packed_float.h)
    p.row_bytes = float_packed_activation_row_bytes(w.cols);
    prepare_float_packed_rows(w.type, x, n_rows, w.cols, ldx, static_cast<float*>(storage));
    return p;
  }
  p.row_bytes = packed_activation_row_bytes(w.cols);
  auto* out = static_cast<uint8_t*>(storage);
  for (int64_t r = 0; r < n_rows; ++r) prepare_packed_row(w, x + r * ldx, out + r * p.row_bytes);
  return p;
}

int64_t output_granule(const Matrix& w) { return w.packed ? kPackRows : 1; }

int64_t prepared_row_granule(const Matrix& w) {
  return w.packed && packable_float(w.type) ? kFloatRowBlock : 1;
}

namespace {

void packed_matmul(const Matrix& w, const PreparedActivations& x, float* y, int64_t ldy, int64_t o_begin,
                   int64_t o_end) {
  GLACIER_ASSERT(o_begin % kPackRows == 0 && (o_end % kPackRows == 0 || o_end == w.rows),
                 "a packed matmul's output range follows 16-row groups");
  if (packable_k_quant(w.type) || packable_float(w.type)) {
    GLACIER_ASSERT(x.packed, "packed weights need activations prepared for them");
    const PackedGemmFn gemm = packable_float(w.type) ? packed_float_gemm(active_isa(), w.type)
                                                     : packed_k_quant_gemm(active_isa(), w.type);
    gemm(w.packed, w.cols, w.rows, o_begin / kPackRows, packed_groups(o_end), static_cast<const uint8_t*>(x.data),
         x.row_bytes, x.n_rows, y, ldy);
    return;
  }
  GLACIER_ASSERT(x.packed, "packed weights need activations prepared for them");
  const DotKernels& k = active_kernels();
  const bool q8 = w.type == WeightType::Q8_0;
  const PackedGemmFn gemm = w.block_sum_order ? (q8 ? k.q8_0_packed_block_sums_gemm : k.q4_0_packed_block_sums_gemm)
                                              : (q8 ? k.q8_0_packed_gemm : k.q4_0_packed_gemm);
  gemm(w.packed, w.cols, w.rows, o_begin / kPackRows, packed_groups(o_end), static_cast<const uint8_t*>(x.data),
       x.row_bytes, x.n_rows, y, ldy);
}

}  // namespace

void matmul(const Matrix& w, const PreparedActivations& x, float* y, int64_t ldy, int64_t o_begin,
            int64_t o_end) {
  GLACIER_ASSERT(x.for_type == w.type,
                 std::string("activations prepared for ") + weight_type_name(x.for_type) +
                     " used with " + weight_type_name(w.type) + " weights");
  GLACIER_ASSERT(x.cols == w.cols, "activation width " + std::to_string(x.cols) +
                                       " differs from weight width " + std::to_string(w.cols));
  GLACIER_ASSERT(0 <= o_begin && o_begin <= o_end && o_end <= w.rows,
                 "output range [" + std::to_string(o_begin) + ", " + std::to_string(o_end) +
                     ") outside 0.." + std::to_string(w.rows));
  check_cols(w.type, w.cols);
  GLACIER_ASSERT(x.n_rows <= 1 || ldy >= o_end, "output row stride shorter than the output range");
  if (o_begin == o_end) return;
  if (w.packed) {
    packed_matmul(w, x, y, ldy, o_begin, o_end);
    return;
  }
  GLACIER_ASSERT(!x.packed, "packed activations with unpacked weights");
  const RowGemmFn float_gemm = w.type == WeightType::F16    ? active_kernels().f16_gemm
                               : w.type == WeightType::BF16 ? active_kernels().bf16_gemm
                                                            : nullptr;
  if (float_gemm) {
    float_gemm(static_cast<const uint8_t*>(w.data), w.row_bytes, o_begin, o_end, w.cols,
               static_cast<const uint8_t*>(x.data), x.row_bytes, x.n_rows, y, ldy);
    return;
  }
  const DotTileFn tile = tile_for(active_kernels(), w.type, w.block_sum_order);
  const auto* wdata = static_cast<const unsigned char*>(w.data);
  const auto* xdata = static_cast<const unsigned char*>(x.data);
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kWeightRowsPerBlock) {
    const int64_t o1 = std::min(o_end, o0 + kWeightRowsPerBlock);
    for (int64_t r0 = 0; r0 < x.n_rows; r0 += kMaxTileRows) {
      const int nx = static_cast<int>(std::min<int64_t>(kMaxTileRows, x.n_rows - r0));
      for (int64_t o = o0; o < o1; ++o)
        tile(wdata + o * w.row_bytes, xdata + r0 * x.row_bytes, x.row_bytes, nx, w.cols,
             y + r0 * ldy + o, ldy);
    }
  }
}

}  // namespace glacier::kernels
