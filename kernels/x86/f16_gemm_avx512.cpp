// AVX-512 F16 and BF16 (widened, for the tiers without AVX512-BF16) dot, row tile and register-tiled GEMM
// (float_gemm.h), and the f32 -> f16 activation row conversion: weights converted in registers (vcvtph2ps,
// or a 16-bit shift for bf16), one 16-lane accumulator per output, 5 weight rows x 4 activation rows a tile.
#include <immintrin.h>

#include "kernels/x86/gcc_undefined_vector_warning.h"

#include "kernels/x86/f16_kernels.h"
#include "kernels/x86/float_gemm.h"

namespace glacier::kernels {

namespace {

inline __mmask16 first(int left) { return static_cast<__mmask16>((1u << left) - 1); }

// The float-vector part both weight types share: 16 lanes, activations widened to float.
struct Float16Lanes {
  using X = uint16_t;
  using XB = float;
  using Acc = __m512;
  using WV = __m512;
  using XV = __m512;
  static constexpr int kStep = 16;
  static constexpr int kGroup = 5;  // 5 x 4 accumulators: measured ahead of 4 x 6, 3 x 8 and 2 x 12 on Zen 5
  static constexpr int kRows = 4;
  static constexpr int kDecodeGroup = 8;
  static constexpr bool kWidenX = true;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 load_x(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_x_tail(const float* p, int left) { return _mm512_maskz_loadu_ps(first(left), p); }
  static __m512 madd(__m512 acc, __m512 w, __m512 x) { return _mm512_fmadd_ps(w, x, acc); }
  static float hsum(__m512 acc) { return _mm512_reduce_add_ps(acc); }
};

// F16 activations converted where the tile reads them, as the weights are: a separate widening pass
// re-read every activation row from L3 once per weight block (12% of the GEMM in pp512) and wrote it
// out again as float.
struct F16Ops : Float16Lanes {
  using W = uint16_t;
  using XB = uint16_t;
  static constexpr bool kWidenX = false;
  static __m512 load_w(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_w_tail(const uint16_t* p, int left) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(left), p));
  }
  static __m512 load_x(const uint16_t* p) { return load_w(p); }
  static __m512 load_x_tail(const uint16_t* p, int left) { return load_w_tail(p, left); }
};

// bf16 widened exactly: its bits in the high half of a float.
struct Bf16WidenOps : Float16Lanes {
  using W = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load_w(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_w_tail(const uint16_t* p, int left) { return widen(_mm256_maskz_loadu_epi16(first(left), p)); }
  static void widen_x(const uint16_t* src, int64_t n, float* dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_w(src + i));
    if (i < n) _mm512_mask_storeu_ps(dst + i, first(static_cast<int>(n - i)), load_w_tail(src + i, static_cast<int>(n - i)));
  }
};

}  // namespace

void f32_to_f16_row_avx512(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), kRound));
  if (i < n) {
    const __mmask16 m = first(static_cast<int>(n - i));
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), kRound));
  }
}

void round_to_f16_row_avx512(const float* x, float* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), kRound)));
  if (i < n) {
    const __mmask16 m = first(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), kRound)));
  }
}

constexpr FloatDotKernels f16_kernels_avx512 = x86::float_gemm::kernels<F16Ops>();
constexpr FloatDotKernels bf16_widen_kernels_avx512 = x86::float_gemm::kernels<Bf16WidenOps>();

}  // namespace glacier::kernels
