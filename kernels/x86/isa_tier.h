// The x86 tier a SIMD source is being built for (kernels/CMakeLists.txt builds dot_*.cpp and
// packed_gemm_*.cpp once per tier, with its -m flags and these macros) and the int8 quad dot each tier has.
#pragma once
#include <immintrin.h>

// 1 when the tier has VNNI's dpbusd (AVX512-VNNI for the AVX-512 sources, AVX-VNNI for the AVX2 ones).
#ifndef GLACIER_X86_VNNI
#define GLACIER_X86_VNNI 0
#endif
// 1 when the tier has AVX512-BF16's dpbf16ps.
#ifndef GLACIER_X86_BF16
#define GLACIER_X86_BF16 0
#endif

#if GLACIER_X86_VNNI && !defined(__AVX512VNNI__) && !defined(__AVXVNNI__)
#error "GLACIER_X86_VNNI set without -mavx512vnni or -mavxvnni"
#endif
#if GLACIER_X86_BF16 && !defined(__AVX512BF16__)
#error "GLACIER_X86_BF16 set without -mavx512bf16"
#endif

// External names of the per-tier builds. AVX-512 sources: the VNNI build keeps the plain name (what the
// avx512 tier has always run), the build without it adds _novnni. AVX2 sources: the VNNI build adds _vnni.
#define GLACIER_X86_PASTE(a, b) a##b
#if GLACIER_X86_VNNI
#define GLACIER_AVX512_TIER_NAME(name) name
#define GLACIER_AVX2_TIER_NAME(name) GLACIER_X86_PASTE(name, _vnni)
#else
#define GLACIER_AVX512_TIER_NAME(name) GLACIER_X86_PASTE(name, _novnni)
#define GLACIER_AVX2_TIER_NAME(name) name
#endif

namespace glacier::kernels::x86 {

// acc + the dot of each 32-bit lane's four unsigned bytes of u with the four signed bytes of s. With VNNI
// one exact instruction. Without it maddubs + madd by ones + add, equal only while no pair sum
// u0 s0 + u1 s1 leaves int16 (maddubs saturates there): each caller states why its ranges stay inside,
// e.g. u <= 128 and |s| <= 127 give at most 2 * 128 * 127 = 32512.
#ifdef __AVX512BW__
inline __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
#if GLACIER_X86_VNNI
  return _mm512_dpbusd_epi32(acc, u, s);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}
#endif

inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if GLACIER_X86_VNNI && defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#elif GLACIER_X86_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

}  // namespace glacier::kernels::x86
