// Measures MachinePeaks with the peak loops of the tier's instruction set, on several threads at once.
#include "machine_peaks.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "peak_loops.h"

namespace glacier::bench {
namespace {

// Seconds for `threads` threads to each run `work(t)` once, best of three.
double parallel_seconds(int threads, const std::function<void(int)>& work) {
  double best = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

bool is_avx512(kernels::Isa tier) {
  return tier == kernels::Isa::Avx512NoVnni || tier == kernels::Isa::Avx512NoBf16 || tier == kernels::Isa::Avx512;
}

}  // namespace

MachinePeaks measure_machine_peaks(kernels::Isa tier, int threads) {
  MachinePeaks p;
  if (tier == kernels::Isa::Ref) return p;  // the scalar twins have no vector ceiling to compare with
  threads = std::max(1, threads);
  constexpr size_t kFloats = size_t(512) << 20 >> 2;  // 512 MiB
  std::vector<float> buf(kFloats, 1.0f);
  std::vector<float> sink(static_cast<size_t>(threads));  // read below, so no loop can be dropped
  p.read_bytes_per_s = double(kFloats * sizeof(float)) / parallel_seconds(threads, [&](int t) {
    const size_t begin = kFloats / threads * t, end = kFloats / threads * (t + 1);
    sink[static_cast<size_t>(t)] = read_sum_avx2(buf.data() + begin, end - begin);
  });
  constexpr int64_t kIters = 1 << 22;
  const bool wide = is_avx512(tier);
  const double per_thread_flops = 2.0 * (wide ? 16 : 8) * kChains * double(kIters);
  p.f32_flops_per_s = per_thread_flops * threads / parallel_seconds(threads, [&](int t) {
    sink[static_cast<size_t>(t)] = wide ? fma_loop_avx512(kIters) : fma_loop_avx2(kIters);
  });
  // Byte products per loop step and the loop for each tier's int8 instructions.
  int32_t (*loop)(int64_t) = maddubs_loop_avx2;
  double products = 32;
  p.int8_instructions = "vpmaddubsw+vpmaddwd (256-bit)";
  if (tier == kernels::Isa::Avx2Vnni) {
    loop = vnni_loop_avxvnni;
    p.int8_instructions = "vpdpbusd (AVX-VNNI, 256-bit)";
  } else if (tier == kernels::Isa::Avx512NoVnni) {
    loop = maddubs_loop_avx512;
    products = 64;
    p.int8_instructions = "vpmaddubsw+vpmaddwd (512-bit)";
  } else if (wide) {
    loop = vnni_loop_avx512;
    products = 64;
    p.int8_instructions = "vpdpbusd (AVX512-VNNI, 512-bit)";
  }
  int32_t (*signed_loop)(int64_t) = nullptr;  // null: the tier's int8 instructions take signed bytes as they are
  if (tier == kernels::Isa::Avx2) {
    signed_loop = signed_maddubs_loop_avx2;
    p.signed_int8_instructions = "vpsignb+vpmaddubsw+vpmaddwd (256-bit)";
  } else if (tier == kernels::Isa::Avx512NoVnni) {
    signed_loop = signed_maddubs_loop_avx512;
    p.signed_int8_instructions = "masked negate+vpmaddubsw+vpmaddwd (512-bit)";
  }
  const double per_thread_ops = 2.0 * products * kChains * double(kIters);
  auto ops_per_s = [&](int32_t (*run)(int64_t)) {
    return per_thread_ops * threads / parallel_seconds(threads, [&](int t) {
      sink[static_cast<size_t>(t)] = float(run(kIters));
    });
  };
  p.int8_ops_per_s = ops_per_s(loop);
  p.signed_int8_ops_per_s = signed_loop ? ops_per_s(signed_loop) : p.int8_ops_per_s;
  if (!signed_loop) p.signed_int8_instructions = p.int8_instructions;
  volatile float keep = 0;
  for (float v : sink) keep = keep + v;
  return p;
}

}  // namespace glacier::bench
