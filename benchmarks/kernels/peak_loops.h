// Loops that measure what the machine can do at best (memory read bandwidth, fp32 FMA and the int8
// multiply-add each kernel tier may use), so kernel figures can be read as a fraction of peak. Each
// returns a value that depends on all the work, so the compiler cannot drop it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::bench {

float read_sum_avx2(const float* data, size_t n);  // streams n floats once
float fma_loop_avx2(int64_t iterations);           // 10 independent 8-lane FMA chains per iteration
float fma_loop_avx512(int64_t iterations);         // 10 independent 16-lane FMA chains
int32_t vnni_loop_avx512(int64_t iterations);      // 10 independent 64-byte dpbusd chains
// int8 products without VNNI: vpmaddubsw + vpmaddwd + vpaddd per 32 (AVX2) or 64 (AVX-512 BW) bytes.
int32_t maddubs_loop_avx2(int64_t iterations);
int32_t maddubs_loop_avx512(int64_t iterations);
// Signed x signed int8 products without VNNI, as Q8_0 weights against Q8 activations need them: the sign
// trick (the weight's magnitude times the activation with the weight's sign) before each vpmaddubsw.
int32_t signed_maddubs_loop_avx2(int64_t iterations);
int32_t signed_maddubs_loop_avx512(int64_t iterations);
int32_t vnni_loop_avxvnni(int64_t iterations);     // 10 independent 32-byte VEX vpdpbusd chains (AVX-VNNI)

constexpr int kChains = 10;

// The signed operands of the int8 loops: kChains rows of Bytes bytes (row k all -2 - k), read as memory
// operands so that the compiler cannot hoist the multiplies out of the loop.
template <int Bytes>
struct SignedOperands {
  alignas(64) int8_t row[kChains][Bytes];
  SignedOperands() {
    for (int k = 0; k < kChains; ++k)
      for (int8_t& v : row[k]) v = static_cast<int8_t>(-2 - k);
  }
};

}  // namespace glacier::bench
