// Loops that measure what the machine can do at best (memory read bandwidth, fp32 FMA and int8
// VNNI throughput), so kernel figures can be read as a fraction of peak. Each returns a value that
// depends on all the work, so the compiler cannot drop it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::bench {

float read_sum_avx2(const float* data, size_t n);  // streams n floats once
float fma_loop_avx2(int64_t iterations);           // 10 independent 8-lane FMA chains per iteration
float fma_loop_avx512(int64_t iterations);         // 10 independent 16-lane FMA chains
int32_t vnni_loop_avx512(int64_t iterations);      // 10 independent 64-byte dpbusd chains

constexpr int kChains = 10;

}  // namespace glacier::bench
