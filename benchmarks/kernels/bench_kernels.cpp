// Kernel throughput for every supported variant and weight type (dot, matmul and attention), reported as
// weight bytes/s and op/s, beside measured machine peaks and OpenBLAS sgemv/sgemm for F32.
// Run: build/bench_kernels [--benchmark_filter=...]; one thread (pin it for stable figures).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compute/kv_cache.h"
#include "kernels/attention.h"
#include "kernels/crc32c.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_float.h"
#include "kernels/packed_gemm.h"
#include "kernels/packed_k_quant.h"
#include "machine_peaks.h"
#include "peak_loops.h"
#include "util/error.h"

namespace glacier::bench {
namespace {

using kernels::Isa;
using kernels::WeightType;

constexpr WeightType kTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0,
                                 WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                 WeightType::IQ4_NL, WeightType::IQ4_XS, WeightType::Q2_K, WeightType::Q3_K,
                                 WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

size_t row_bytes(WeightType t, int64_t cols) {
  switch (t) {
    case WeightType::F32: return size_t(cols) * 4;
    case WeightType::F16:
    case WeightType::BF16: return size_t(cols) * 2;
    case WeightType::Q8_0: return size_t(cols / 32) * sizeof(kernels::BlockQ8_0);
    case WeightType::Q4_0: return size_t(cols / 32) * sizeof(kernels::BlockQ4_0);
    case WeightType::Q4_K: return size_t(cols / 256) * 144;  // super-block sizes of the GGUF layout
    case WeightType::Q5_K: return size_t(cols / 256) * 176;
    case WeightType::Q6_K: return size_t(cols / 256) * 210;
    case WeightType::Q4_1: return size_t(cols / 32) * sizeof(kernels::BlockQ4_1);
    case WeightType::Q5_0: return size_t(cols / 32) * sizeof(kernels::BlockQ5_0);
    case WeightType::Q5_1: return size_t(cols / 32) * sizeof(kernels::BlockQ5_1);
    case WeightType::IQ4_NL: return size_t(cols / 32) * sizeof(kernels::BlockIQ4_NL);
    case WeightType::IQ4_XS: return size_t(cols / 256) * sizeof(kernels::BlockIQ4_XS);
    case WeightType::Q2_K: return size_t(cols / 256) * sizeof(kernels::BlockQ2_K);
    case WeightType::Q3_K: return size_t(cols / 256) * sizeof(kernels::BlockQ3_K);
  }
  return 0;
}

// Random weights in storage form: plausible values for every type (small fp16 scales for blocks).
std::vector<unsigned char> random_weights(WeightType t, int64_t rows, int64_t cols) {
  std::vector<unsigned char> bytes(row_bytes(t, cols) * size_t(rows));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  if (t == WeightType::F32) {
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 4; ++i) f[i] = dist(rng);
  } else if (t == WeightType::F16 || t == WeightType::BF16) {
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 2; ++i)
      h[i] = t == WeightType::F16 ? kernels::f32_to_fp16(dist(rng)) : kernels::f32_to_bf16(dist(rng));
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : bytes) b = static_cast<unsigned char>(byte(rng));
    // Each block's fp16 scale and min (random bytes could be NaN) where its layout keeps them: first in
    // the 32-element blocks, IQ4_XS and Q4_K/Q5_K; last in Q2_K, Q3_K and Q6_K.
    const bool super_block = t == WeightType::IQ4_XS || t == WeightType::Q2_K || t == WeightType::Q3_K ||
                             t == WeightType::Q4_K || t == WeightType::Q5_K || t == WeightType::Q6_K;
    const size_t block = super_block ? row_bytes(t, 256) : row_bytes(t, 32);
    const bool has_min = t == WeightType::Q4_1 || t == WeightType::Q5_1 || t == WeightType::Q4_K ||
                         t == WeightType::Q5_K || t == WeightType::Q2_K;
    const bool at_end = t == WeightType::Q2_K || t == WeightType::Q3_K || t == WeightType::Q6_K;
    const size_t scale_bytes = has_min ? 4 : 2;
    for (size_t off = 0; off < bytes.size(); off += block) {
      const uint16_t d = kernels::f32_to_fp16(0.01f);
      const size_t at = off + (at_end ? block - scale_bytes : 0);
      std::memcpy(bytes.data() + at, &d, 2);
      if (has_min) std::memcpy(bytes.data() + at + 2, &d, 2);
    }
  }
  return bytes;
}

std::vector<float> random_activations(int64_t rows, int64_t cols) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = dist(rng);
  return x;
}

// The machine's peaks, measured once at start-up by the same loops as the peak/ benchmarks, so every
// kernel's rate is also printed as a fraction of the roofline it is up against.
// Ceilings per kernel tier (one thread, as the kernels here run), measured at start: each kernel's
// fractions are of its own tier's instructions, so an AVX2 kernel is not held to AVX-512 VNNI's peak.
std::map<Isa, MachinePeaks> g_peaks;

bool is_block_type(WeightType t) { return t != WeightType::F32 && t != WeightType::F16 && t != WeightType::BF16; }

// Rates, and the fractions of peak: read bandwidth for the weights, and the arithmetic peak of the
// kernel's kind (int8 for the block types of weight type t, fp32 FMA for the float types). Q8_0 on a tier
// without VNNI also gets of_signed_peak: its signed x signed products need the sign trick, whose own loop
// is the ceiling such a kernel can reach.
// `seconds`: the wall time of the whole timed loop (its iterations), for the plain fractions.
void set_rates(benchmark::State& state, double weight_bytes, double ops, double seconds, WeightType t) {
  const double n = double(state.iterations());
  state.counters["weight_B/s"] = benchmark::Counter(weight_bytes * n, benchmark::Counter::kIsRate);
  state.counters["op/s"] = benchmark::Counter(ops * n, benchmark::Counter::kIsRate);
  const MachinePeaks& peaks = g_peaks[kernels::active_isa()];
  if (seconds <= 0) return;
  if (peaks.read_bytes_per_s > 0) state.counters["of_read_peak"] = weight_bytes * n / seconds / peaks.read_bytes_per_s;
  const double op_peak = is_block_type(t) ? peaks.int8_ops_per_s : peaks.f32_flops_per_s;
  if (op_peak > 0) state.counters["of_op_peak"] = ops * n / seconds / op_peak;
  if (t == WeightType::Q8_0 && peaks.signed_int8_ops_per_s > 0 && peaks.signed_int8_ops_per_s != peaks.int8_ops_per_s)
    state.counters["of_signed_peak"] = ops * n / seconds / peaks.signed_int8_ops_per_s;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One weight row (in L1/L2) against one prepared activation row.
void dot_bench(benchmark::State& state, Isa isa, WeightType t) {
  const int64_t n = state.range(0);
  kernels::set_active_isa(isa);
  const auto w = random_weights(t, 1, n);
  const auto x = random_activations(1, n);
  std::vector<unsigned char> storage(kernels::activation_bytes(t, 1, n));
  const auto p = kernels::prepare_activations(t, x.data(), 1, n, n, storage.data());
  const kernels::DotTileFn tile = kernels::tile_for(kernels::kernels_for(isa), t, false);
  float out = 0;
  const double t0 = now_s();
  for (auto _ : state) {
    tile(w.data(), p.data, p.row_bytes, 1, n, &out, 1);
    benchmark::DoNotOptimize(out);
  }
  set_rates(state, double(row_bytes(t, n)), 2.0 * double(n), now_s() - t0, t);
}

// rows x cols weights (larger than the caches) times a batch of range(0) activation rows; `packed`: the
// matrix repacked for the packed GEMM (kernels/packed_gemm.h), as the model loader does, Q8_0 in the order
// it picks unless `lane_order` asks for the other one.
void matmul_bench(benchmark::State& state, Isa isa, WeightType t, int64_t rows, int64_t cols, bool packed,
                  bool lane_order) {
  const int64_t batch = state.range(0);
  kernels::set_active_isa(isa);
  const auto w = random_weights(t, rows, cols);
  kernels::Matrix m{t, w.data(), rows, cols, row_bytes(t, cols)};
  m.block_sum_order = !lane_order && kernels::preferred_block_sum_order(t, rows);
  std::unique_ptr<uint8_t, decltype(&std::free)> packed_copy(nullptr, &std::free);
  if (packed) {
    packed_copy.reset(static_cast<uint8_t*>(std::aligned_alloc(kernels::kPackAlign, kernels::packed_bytes(m))));
    kernels::pack_groups(m, packed_copy.get(), 0, kernels::packed_groups(rows));
    m.packed = packed_copy.get();
  }
  const auto x = random_activations(batch, cols);
  std::vector<unsigned char> storage(kernels::activation_bytes(m, batch));
  std::vector<float> y(size_t(batch * rows));
  const double t0 = now_s();
  for (auto _ : state) {
    const auto p = kernels::prepare_activations(m, x.data(), batch, cols, storage.data());
    kernels::matmul(m, p, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  set_rates(state, double(w.size()), 2.0 * double(rows * cols * batch), now_s() - t0, t);
}

// One decode row's attention over a window of range(0) positions in the engine's KV cache
// (src/compute/kv_cache.h: keys and values in 16-position tiles, memory not zeroed), 4 KV heads of 64
// each shared by `group` query heads (2: the sweep model; 8: Llama 1.1B). Positions past the window are
// never written, as in a live cache: a window that ends early in a tile must not pay for the tile's
// unwritten rest.
void attention_bench(benchmark::State& state, Isa isa, int32_t group) {
  constexpr int32_t kKvHeads = 4, kHeadDim = 64, kCtx = 4096;
  const int32_t kQueryHeadsPerKv = group;
  const int32_t n = static_cast<int32_t>(state.range(0)), kv_dim = kKvHeads * kHeadDim;
  compute::KvCache cache(1, 1, kCtx, kKvHeads, kHeadDim);
  const auto kv = random_activations(n, kv_dim);
  for (int32_t t = 0; t < n; ++t) {
    cache.store_key(0, 0, t, kv.data() + size_t(t) * kv_dim);
    cache.store_value(0, 0, t, kv.data() + size_t(t) * kv_dim);
  }
  const auto q = random_activations(kKvHeads * kQueryHeadsPerKv, kHeadDim);
  std::vector<float> scratch(kernels::attention_scratch_floats(kQueryHeadsPerKv, n));
  std::vector<float> out(size_t(kKvHeads) * kQueryHeadsPerKv * kHeadDim);
  const kernels::AttendFn attend = kernels::kernels_for(isa).attend;
  for (auto _ : state) {
    for (int32_t h = 0; h < kKvHeads; ++h) {
      kernels::AttentionArgs a;
      a.q = q.data() + size_t(h) * kQueryHeadsPerKv * kHeadDim;
      a.q_stride = kHeadDim;
      a.n_q = kQueryHeadsPerKv;
      a.key_tiles = cache.key_tiles(0, 0) + size_t(h) * kHeadDim * kernels::kKeyTile;
      a.tile_stride = cache.tile_stride();
      a.value_tiles = cache.value_tiles(0, 0) + size_t(h) * kHeadDim * kernels::kKeyTile;
      a.first = 0;
      a.last = n - 1;
      a.hd = kHeadDim;
      a.scale = 0.125f;
      a.scores = scratch.data();
      a.out = out.data() + size_t(h) * kQueryHeadsPerKv * kHeadDim;
      a.out_stride = kHeadDim;
      attend(a);
    }
    benchmark::DoNotOptimize(out.data());
  }
  // K and V bytes the row reads.
  state.counters["kv_B/s"] = benchmark::Counter(2.0 * n * kv_dim * sizeof(float) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// CRC32C of an in-cache buffer of state.range(0) bytes (a pipeline message: 8 KiB is one token of a
// 2048-wide model in f32, 1 MiB a 128-token prefill chunk).
void crc32c_bench(benchmark::State& state, bool sse42) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf(n);
  std::mt19937 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = sse42 ? kernels::crc32c_sse42(buf.data(), n, crc) : kernels::crc32c_portable(buf.data(), n, crc);
    benchmark::DoNotOptimize(crc);
  }
  state.counters["B/s"] = benchmark::Counter(double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void openblas_bench(benchmark::State& state, int64_t rows, int64_t cols) {
  const int64_t batch = state.range(0);
  const auto w = random_activations(rows, cols);
  const auto x = random_activations(batch, cols);
  std::vector<float> y(size_t(batch * rows));
  const double t0 = now_s();
  for (auto _ : state) {
    if (batch == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(rows), int(cols), 1.0f, w.data(), int(cols), x.data(), 1,
                  0.0f, y.data(), 1);
    else  // y[batch x rows] = x[batch x cols] * W^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(batch), int(rows), int(cols), 1.0f, x.data(),
                  int(cols), w.data(), int(cols), 0.0f, y.data(), int(rows));
    benchmark::DoNotOptimize(y.data());
  }
  set_rates(state, double(w.size() * 4), 2.0 * double(rows * cols * batch), now_s() - t0, WeightType::F32);
}

void peak_read_bandwidth(benchmark::State& state) {
  constexpr size_t kBytes = size_t(256) << 20;
  std::vector<float> buf(kBytes / 4, 1.0f);
  for (auto _ : state) benchmark::DoNotOptimize(read_sum_avx2(buf.data(), buf.size()));
  state.counters["read_B/s"] = benchmark::Counter(double(kBytes) * double(state.iterations()),
                                                  benchmark::Counter::kIsRate);
}

constexpr int64_t kPeakIterations = 1 << 20;

void peak_fma(benchmark::State& state, bool avx512) {
  for (auto _ : state)
    benchmark::DoNotOptimize(avx512 ? fma_loop_avx512(kPeakIterations) : fma_loop_avx2(kPeakIterations));
  const double lanes = avx512 ? 16 : 8;
  state.counters["flop/s"] = benchmark::Counter(2 * lanes * kChains * double(kPeakIterations) *
                                                    double(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void peak_vnni(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(vnni_loop_avx512(kPeakIterations));
  // 64 byte products and 64 additions per dpbusd.
  state.counters["op/s"] = benchmark::Counter(128.0 * kChains * double(kPeakIterations) *
                                                  double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

void register_all() {
  const bool avx2 = kernels::cpu_supports(Isa::Avx2);
  const bool avx512 = kernels::cpu_supports(Isa::Avx512NoBf16);  // the peak loops need AVX-512 with VNNI, not BF16
  for (Isa isa : kernels::supported_isas()) {
    if (isa == Isa::Ref) continue;
    const MachinePeaks& p = g_peaks[isa] = measure_machine_peaks(isa, 1);
    std::printf("peaks of tier %s (1 thread): read %.1f GB/s, fp32 FMA %.0f GFLOP/s, int8 %.0f GOP/s with %s, "
                "signed x signed %.0f GOP/s with %s\n",
                kernels::isa_name(isa), p.read_bytes_per_s / 1e9, p.f32_flops_per_s / 1e9, p.int8_ops_per_s / 1e9,
                p.int8_instructions.c_str(), p.signed_int8_ops_per_s / 1e9, p.signed_int8_instructions.c_str());
  }
  std::printf("of_read_peak, of_op_peak and of_signed_peak below are fractions of the peaks of the tier a kernel runs on\n");
  if (avx2) {
    benchmark::RegisterBenchmark("peak/read_256MB", peak_read_bandwidth)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("peak/fma_f32_avx2", peak_fma, false);
  }
  if (avx512) {
    benchmark::RegisterBenchmark("peak/fma_f32_avx512", peak_fma, true);
    benchmark::RegisterBenchmark("peak/vnni_int8_avx512", peak_vnni);
  }
  benchmark::RegisterBenchmark("crc32c/portable", crc32c_bench, false)->Arg(8 << 10)->Arg(1 << 20);
  if (kernels::cpu_has_crc32c())
    benchmark::RegisterBenchmark("crc32c/sse4.2", crc32c_bench, true)->Arg(8 << 10)->Arg(1 << 20);
  constexpr int64_t kRows = 4096, kCols = 4096;
  benchmark::RegisterBenchmark("openblas/F32/4096x4096", openblas_bench, kRows, kCols)
      ->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);
  for (Isa isa : kernels::supported_isas())  // a window of whole tiles, and one that ends a position into a tile
    for (const int32_t group : {2, 8})
      benchmark::RegisterBenchmark(("attend/" + std::string(kernels::isa_name(isa)) + "/" + std::to_string(4 * group) + "x64-heads").c_str(),
                                   attention_bench, isa, group)->Arg(64)->Arg(65)->Arg(512)->Arg(513);
  for (Isa isa : kernels::supported_isas()) {
    for (WeightType t : kTypes) {
      const std::string suffix = std::string(kernels::isa_name(isa)) + "/" + kernels::weight_type_name(t);
      benchmark::RegisterBenchmark(("dot/" + suffix).c_str(), dot_bench, isa, t)->Arg(4096);
      auto* unpacked = benchmark::RegisterBenchmark(("matmul/" + suffix + "/4096x4096").c_str(), matmul_bench, isa, t,
                                                    kRows, kCols, false, false);
      unpacked->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);
      // A prefill batch too for the row-by-row K-quant dots the packed GEMM replaces at load, and for F16 and
      // BF16, which the AVX-512 tiers run unpacked (the AVX2 ones pack them, packed_float.h).
      const bool float_weights = t == WeightType::F16 || t == WeightType::BF16;
      if (isa != Isa::Ref && (kernels::packable_k_quant(t) || float_weights)) unpacked->Arg(512);
      // Decode of float weights from memory (256 MB, larger than the L3), as a model's weights stream.
      if (isa != Isa::Ref && float_weights)
        benchmark::RegisterBenchmark(("matmul/" + suffix + "/32768x4096").c_str(), matmul_bench, isa, t, 32768, kCols,
                                     false, false)->Arg(1)->Unit(benchmark::kMillisecond);
      // The loader's choice for the tier of the row (F16 and BF16 are packed on some tiers only).
      if (!(float_weights ? kernels::packs_float_weights(isa) : kernels::packable(t))) continue;
      auto* b = benchmark::RegisterBenchmark(("packed/" + suffix + "/4096x4096").c_str(), matmul_bench, isa, t, kRows,
                                             kCols, true, false);
      b->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);
      if (isa == Isa::Ref) continue;
      b->Arg(64)->Arg(512);  // prefill batches; the scalar twin would take minutes
      if (t == WeightType::Q8_0)  // llama.cpp's lane order beside the block sums the loader picks
        benchmark::RegisterBenchmark(("packed/" + suffix + "-lanes/4096x4096").c_str(), matmul_bench, isa, t, kRows,
                                     kCols, true, true)
            ->Arg(1)->Arg(8)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);
      // Decode from memory: a matrix larger than the L3 (Q8_0 278 MB), as a model's weights stream; one
      // sequence and a batch of 8 (where the weight stream and the arithmetic must overlap).
      benchmark::RegisterBenchmark(("packed/" + suffix + "/65536x4096").c_str(), matmul_bench, isa, t, 65536, kCols, true, false)
          ->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace glacier::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Each benchmark names its tier; the default one is what the engine would run here.
  namespace k = glacier::kernels;
  std::string tiers;
  for (k::Isa isa : k::supported_isas()) tiers += std::string(tiers.empty() ? "" : ", ") + k::isa_name(isa);
  try {
    std::printf("kernel tiers on this CPU: %s; in use (GLACIER_KERNELS or the best): %s; crc32c: %s\n", tiers.c_str(),
                k::isa_name(k::active_isa()), k::crc32c_variant());
  } catch (const glacier::InputError& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 2;
  }
  glacier::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
