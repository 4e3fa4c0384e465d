// AVX2 + F16C F16 and BF16 dot, row tile and register-tiled GEMM (float_gemm.h), and the f32 -> f16
// activation row conversion (vcvtps2ph): weights converted in
// registers (vcvtph2ps, or a 16-bit shift for bf16), activation rows widened once a tile, one 8-lane
// accumulator per output, 3 weight rows x 4 activation rows a tile (12 of the 16 ymm registers).
#include <immintrin.h>

#include <cstring>

#include "kernels/x86/f16_kernels.h"
#include "kernels/x86/float_gemm.h"
#include "kernels/x86/lanes_256.h"

namespace glacier::kernels {

namespace {

// The float-vector part both weight types share: 8 lanes, activations widened to float.
struct Float8Lanes {
  using X = uint16_t;
  using XB = float;
  using Acc = __m256;
  using WV = __m256;
  using XV = __m256;
  static constexpr int kStep = 8;
  static constexpr int kGroup = 3;
  static constexpr int kRows = 4;
  static constexpr int kDecodeGroup = 8;  // 8 FMA chains hide its latency: 4 measured 15% slower one-thread
  static constexpr bool kWidenX = true;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 load_x(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load_x_tail(const float* p, int left) {
    float padded[8] = {};
    std::memcpy(padded, p, sizeof(float) * static_cast<size_t>(left));
    return _mm256_loadu_ps(padded);
  }
  static __m256 madd(__m256 acc, __m256 w, __m256 x) { return _mm256_fmadd_ps(w, x, acc); }
  static float hsum(__m256 v) { return hsum8(v); }
  static __m128i halves_tail(const uint16_t* p, int left) {
    uint16_t padded[8] = {};
    std::memcpy(padded, p, sizeof(uint16_t) * static_cast<size_t>(left));
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(padded));
  }
};

struct F16Ops : Float8Lanes {
  using W = uint16_t;
  static __m256 load_w(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m256 load_w_tail(const uint16_t* p, int left) { return _mm256_cvtph_ps(halves_tail(p, left)); }
  static void widen_x(const uint16_t* src, int64_t n, float* dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_w(src + i));
    for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
  }
};

// bf16 widened exactly: its bits in the high half of a float.
struct Bf16WidenOps : Float8Lanes {
  using W = uint16_t;
  static __m256 load_w(const uint16_t* p) { return widen_bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m256 load_w_tail(const uint16_t* p, int left) { return widen_bf16x8(halves_tail(p, left)); }
  static void widen_x(const uint16_t* src, int64_t n, float* dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_w(src + i));
    for (; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
      std::memcpy(dst + i, &bits, sizeof bits);
    }
  }
};

}  // namespace

void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  for (; i < n; ++i) y[i] = static_cast<uint16_t>(_cvtss_sh(x[i], kRound));
}

void round_to_f16_row_avx2(const float* x, float* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound)));
  for (; i < n; ++i) y[i] = _cvtsh_ss(static_cast<unsigned short>(_cvtss_sh(x[i], kRound)));
}

constexpr FloatDotKernels f16_kernels_avx2 = x86::float_gemm::kernels<F16Ops>();
constexpr FloatDotKernels bf16_kernels_avx2 = x86::float_gemm::kernels<Bf16WidenOps>();

}  // namespace glacier::kernels
