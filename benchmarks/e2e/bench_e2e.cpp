// End-to-end speed of one rank on a GGUF model, as llama-bench and llama-batched-bench define it:
// prefill (pp), decode (tg) and batched decode over N sequences, plus the machine's ceilings in the same
// run: read bandwidth for the decode bound, the tier's int8 or fp32 peak for prefill. Prints fixed
// columns and, with --json, writes the raw figures.
// Run: build/bench_e2e --model M.gguf [--threads 2] [--pp 128,512] [--tg 128] [--npl 1,8,32] [--json F]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../kernels/machine_peaks.h"
#include "compute/decode_batch.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "kernels/crc32c.h"
#include "kernels/dispatch.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pipeline/local_ring.h"
#include "pipeline/scheduler.h"
#include "pipeline/wire.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace glacier::bench {
namespace {

struct Options {
  std::string model;
  int threads = 2;
  std::vector<int> pp{128, 512};
  int tg = 128;
  std::vector<int> npl{1, 8, 32};
  int npp = 128;  // batched: prompt tokens per sequence
  int ntg = 64;   // batched: new tokens per sequence
  int ubatch = 512;
  int reps = 3;
  std::string json;
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoi(part));
  return out;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_e2e: %s\nusage: bench_e2e --model M.gguf [--threads N] [--pp 128,512] [--tg 128] "
               "[--npl 1,8,32] [--npp 128] [--ntg 64] [--ubatch 512] [--reps 3] [--json OUT]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("option " + a + " expects a value").c_str());
      return argv[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--pp") o.pp = parse_list(value());
    else if (a == "--tg") o.tg = std::stoi(value());
    else if (a == "--npl") o.npl = parse_list(value());
    else if (a == "--npp") o.npp = std::stoi(value());
    else if (a == "--ntg") o.ntg = std::stoi(value());
    else if (a == "--ubatch") o.ubatch = std::stoi(value());
    else if (a == "--reps") o.reps = std::stoi(value());
    else if (a == "--json") o.json = value();
    else usage(("unknown option " + a).c_str());
  }
  if (o.model.empty()) usage("--model is required");
  return o;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Multiply-adds x 2 of the weight matrices one token goes through (the embedding is a lookup, not a
// product; routed experts count at n_expert_used / n_expert), and whether most of those weights are
// quantized blocks (int8 products) rather than floats (fp32 FMA after conversion).
struct TokenWork {
  double ops = 0;
  bool int8 = false;
  bool mostly_q8_0 = false;  // most block products are Q8_0's signed x signed ones
};

TokenWork token_work(const gguf::File& f, const model::ModelConfig& cfg) {
  const bool tied = f.find_tensor("output.weight") == nullptr;
  double block_elems = 0, float_elems = 0, q8_0_elems = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.n_dims < 2 || (t.name == "token_embd.weight" && !tied)) continue;
    double elems = 1;
    for (int d = 0; d < t.n_dims; ++d) elems *= double(t.ne[d]);
    if (t.n_dims == 3 && cfg.n_expert > 0) elems *= double(cfg.n_expert_used) / cfg.n_expert;
    const bool is_float = t.type == gguf::TensorType::F32 || t.type == gguf::TensorType::F16 || t.type == gguf::TensorType::BF16;
    (is_float ? float_elems : block_elems) += elems;
    if (t.type == gguf::TensorType::Q8_0) q8_0_elems += elems;
  }
  return {2.0 * (block_elems + float_elems), block_elems > float_elems, q8_0_elems > block_elems / 2};
}

// Weight bytes one decode step reads: every matrix once, but of an embedding table that is not also the
// output head only the token's row (the rest of it, 5% of a 1B Llama, would inflate the bound).
uint64_t decode_read_bytes(const gguf::File& f, uint64_t weight_bytes) {
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || f.find_tensor("output.weight") == nullptr || embd->n_dims != 2) return weight_bytes;
  const uint64_t row = embd->n_bytes / static_cast<uint64_t>(embd->ne[1]);
  return weight_bytes - embd->n_bytes + row;
}

class Engine {
 public:
  Engine(const Options& o, int32_t n_ctx, int32_t n_slots) : n_ctx_(n_ctx), n_slots_(n_slots), ubatch_(o.ubatch) {
    file_ = gguf::File::open(o.model);
    cfg_ = model::read_model_config(*file_);
    pool_ = std::make_unique<ThreadPool>(o.threads);
    model::ShardWeights w = model::load_shard(*file_, cfg_, {0, cfg_.n_layer}, true, true, pool_.get());
    weight_bytes_ = w.bytes;
    stage_ = std::make_unique<compute::TransformerStage>(cfg_, std::move(w), n_slots, n_ctx, o.ubatch, *pool_);
  }
  const model::ModelConfig& config() const { return cfg_; }
  const gguf::File& file() const { return *file_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

  struct Timing {
    double seconds = 0.0;         // the whole run
    double decode_seconds = 0.0;  // from when the last prompt token was computed to the end
    int64_t decode_tokens = 0;    // tokens decoded in that span (all sequences decoding, as in a TG phase)
  };
  // Runs n_seq sequences of `prompt` random tokens each, generating `generate` tokens (greedy, no stop).
  Timing run(int n_seq, int prompt, int generate, uint32_t seed) {
    pipeline::LocalRing ring(*stage_, 1);
    pipeline::SchedulerOptions opt;
    opt.n_slots = n_slots_;
    opt.n_ctx = n_ctx_;
    opt.ubatch = ubatch_;
    opt.max_in_flight = 1;  // as a one-stage job schedules (app/job.cpp scheduler_options)
    opt.decode_groups = 1;
    pipeline::Scheduler sched(opt, ring, [](const pipeline::SequenceOutcome&) { return false; },
                              [](pipeline::SequenceOutcome&&) {});
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> token(1, cfg_.n_vocab - 1);
    for (int s = 0; s < n_seq; ++s) {
      pipeline::SequenceRequest r;
      r.seq = s;
      r.tokens.resize(static_cast<size_t>(prompt));
      for (auto& t : r.tokens) t = token(rng);
      r.max_new_tokens = generate;
      r.prompt_key = static_cast<uint64_t>(s);
      sched.add(std::move(r));
    }
    // The scheduler asks before building each micro-batch, one in flight: the first time every prompt
    // token has been sent, all of them have been computed, and each micro-batch after is decode only.
    const int64_t prompt_tokens = static_cast<int64_t>(n_seq) * prompt;
    double t_prefilled = -1.0;
    int64_t decoded_before = 0;
    sched.set_decode_groups_policy([&](const pipeline::Scheduler::DecodeGroupsQuery& q) {
      if (t_prefilled < 0.0 && q.prompt_tokens_sent >= prompt_tokens) {
        t_prefilled = now();
        decoded_before = q.decode_steps_sent;
      }
      return opt.decode_groups;
    });
    const double t0 = now();
    sched.run();
    const double t1 = now();
    Timing t;
    t.seconds = t1 - t0;
    if (t_prefilled >= 0.0) {
      t.decode_seconds = t1 - t_prefilled;
      // Every sequence takes generate - 1 decode steps (its first token is sampled by its prefill).
      t.decode_tokens = static_cast<int64_t>(n_seq) * (generate - 1) - decoded_before;
    }
    return t;
  }

 private:
  int32_t n_ctx_, n_slots_, ubatch_;
  std::unique_ptr<gguf::File> file_;
  model::ModelConfig cfg_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<compute::TransformerStage> stage_;
  uint64_t weight_bytes_ = 0;
};

// Seconds to compute the CRC32C of one f32 forward message of a decode micro-batch of n_tokens tokens
// (one per sequence): the work the checksum adds on each side of a link, the sender sealing the message
// and the receiver checking it. Median of repeated timings of many checks each.
double message_checksum_seconds(int n_tokens, int32_t n_embd) {
  compute::MicroBatch mb = compute::one_token_rows(n_tokens, 1, compute::OutputKind::Sample);
  mb.id = 1;
  std::vector<float> x(static_cast<size_t>(n_tokens) * n_embd, 0.5f);
  std::vector<uint8_t> msg;
  pipeline::encode_forward(mb, x.data(), n_embd, pipeline::WireCodec::F32, msg);
  constexpr int kChecks = 2000, kTimings = 7;
  std::vector<double> t;
  for (int r = 0; r < kTimings; ++r) {
    const double t0 = now();
    for (int i = 0; i < kChecks; ++i)
      if (pipeline::check_message(msg.data(), msg.size()).status != pipeline::MessageCheck::Status::Sound) return -1;
    t.push_back((now() - t0) / kChecks);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace glacier::bench

int main(int argc, char** argv) {
  using namespace glacier::bench;
  const Options o = parse(argc, argv);
  if (!glacier::kernels::cpu_supports(glacier::kernels::Isa::Avx2)) {
    std::fprintf(stderr, "bench_e2e: needs an x86 CPU with AVX2 (for its bandwidth loop)\n");
    return 2;
  }
  // The kernel tier every figure below ran on: the best the CPU has, or GLACIER_KERNELS's.
  std::string kernels;
  try {
    kernels = glacier::kernels::isa_name(glacier::kernels::active_isa());
  } catch (const glacier::InputError& e) {
    std::fprintf(stderr, "bench_e2e: %s\n", e.what());
    return 2;
  }
  int max_pp = 0;
  for (int p : o.pp) max_pp = std::max(max_pp, p);
  int max_npl = 1;
  for (int n : o.npl) max_npl = std::max(max_npl, n);
  const int32_t n_ctx = std::max({max_pp + 2, o.tg + 2, o.npp + o.ntg + 1});
  const double t_load = now();
  Engine engine(o, n_ctx, max_npl);
  std::printf("model %s: %d layers, n_embd %d, %.1f MiB of weights; loaded and packed in %.1f s; %d threads; "
              "kernels %s\n",
              o.model.c_str(), engine.config().n_layer, engine.config().n_embd, engine.weight_bytes() / 1048576.0,
              now() - t_load, o.threads, kernels.c_str());
  const MachinePeaks peaks = measure_machine_peaks(glacier::kernels::active_isa(), o.threads);
  const double bandwidth = peaks.read_bytes_per_s;
  const uint64_t decode_bytes = decode_read_bytes(engine.file(), engine.weight_bytes());
  const TokenWork work = token_work(engine.file(), engine.config());
  const double op_ceiling = work.int8 ? peaks.int8_ops_per_s : peaks.f32_flops_per_s;
  const char* ceiling_kind = work.int8 ? "int8" : "fp32";
  std::printf("ceilings (%d threads, tier %s): read %.1f GB/s -> decode bound %.1f tok/s (%.1f MiB of weights read a "
              "token / bandwidth); fp32 FMA %.0f GFLOP/s; int8 %.0f GOP/s with %s\n",
              o.threads, kernels.c_str(), bandwidth / 1e9, bandwidth / double(decode_bytes), decode_bytes / 1048576.0,
              peaks.f32_flops_per_s / 1e9, peaks.int8_ops_per_s / 1e9, peaks.int8_instructions.c_str());
  std::printf("prefill: %.2f GOP a token of %s products -> ceiling %.1f tok/s\n", work.ops / 1e9, ceiling_kind,
              op_ceiling / work.ops);
  // Q8_0 on a tier without VNNI: the sign trick before every multiply sets a lower ceiling of its own.
  const bool sign_trick = work.int8 && work.mostly_q8_0 && peaks.signed_int8_ops_per_s > 0 &&
                          peaks.signed_int8_ops_per_s != peaks.int8_ops_per_s;
  if (sign_trick)
    std::printf("Q8_0 products take the sign trick on this tier: %.0f GOP/s with %s -> ceiling %.1f tok/s\n",
                peaks.signed_int8_ops_per_s / 1e9, peaks.signed_int8_instructions.c_str(),
                peaks.signed_int8_ops_per_s / work.ops);
  (void)engine.run(1, 8, 2, 1);  // warm-up: first touches of the KV cache and buffers

  double decode_step = 0.0;
  std::ostringstream json;
  json << "{\"model\": \"" << o.model << "\", \"threads\": " << o.threads << ", \"kernels\": \"" << kernels
       << "\", \"weight_bytes\": "
       << engine.weight_bytes() << ", \"decode_bytes\": " << decode_bytes << ", \"read_bandwidth\": " << bandwidth << ", \"f32_peak\": " << peaks.f32_flops_per_s
       << ", \"int8_peak\": " << peaks.int8_ops_per_s << ", \"int8_instructions\": \"" << peaks.int8_instructions
       << "\", \"signed_int8_peak\": " << peaks.signed_int8_ops_per_s << ", \"sign_trick\": " << (sign_trick ? "true" : "false")
       << ", \"ops_per_token\": " << work.ops
       << ", \"prefill_ceiling\": \"" << ceiling_kind << "\"";
  std::printf("%-10s %6s %6s %10s %10s\n", "test", "seqs", "tokens", "seconds", "tok/s");
  for (int p : o.pp) {
    std::vector<double> t;
    for (int r = 0; r < o.reps; ++r) t.push_back(engine.run(1, p, 1, 10 + r).seconds);  // one sampled token: the head once
    const double s = median(t);
    std::printf("%-10s %6d %6d %10.3f %10.1f   (%.0f%% of the %s ceiling", ("pp" + std::to_string(p)).c_str(), 1, p, s,
                p / s, 100.0 * p / s * work.ops / op_ceiling, ceiling_kind);
    if (sign_trick) std::printf(", %.0f%% of the sign trick's", 100.0 * p / s * work.ops / peaks.signed_int8_ops_per_s);
    std::printf(")\n");
    json << ", \"pp" << p << "\": " << p / s;
  }
  {
    std::vector<double> t;
    // One prompt token, then tg decode steps of one token (llama-bench's tg starts from an empty context).
    for (int r = 0; r < o.reps; ++r) t.push_back(engine.run(1, 1, o.tg, 20 + r).seconds);
    const double s = median(t);
    std::printf("%-10s %6d %6d %10.3f %10.1f   (%.0f%% of the bandwidth bound)\n", ("tg" + std::to_string(o.tg)).c_str(), 1,
                o.tg, s, o.tg / s, 100.0 * o.tg / s * double(decode_bytes) / bandwidth);
    json << ", \"tg" << o.tg << "\": " << o.tg / s;
    decode_step = s / o.tg;
  }
  std::vector<std::pair<int, double>> batched_steps;  // sequences, seconds a decode step
  json << ", \"batched\": [";
  for (size_t i = 0; i < o.npl.size(); ++i) {
    const int n = o.npl[i];
    // As llama-batched-bench times its phases: prefill from a run that samples one token a sequence,
    // decode from the whole run's span after its last prompt token (there every micro-batch is a decode
    // step of all n sequences; before it, decode steps ride with other sequences' prompt chunks).
    std::vector<double> prefill, whole, decode_rate;
    for (int r = 0; r < o.reps; ++r) {
      prefill.push_back(engine.run(n, o.npp, 1, 30 + r).seconds);
      const Engine::Timing t = engine.run(n, o.npp, o.ntg, 30 + r);
      whole.push_back(t.seconds);
      decode_rate.push_back(t.decode_seconds > 0.0 ? t.decode_tokens / t.decode_seconds : 0.0);
    }
    const double t_pp = median(prefill), t_all = median(whole);
    const double s_total = double(n) * (o.npp + o.ntg) / t_all;
    const double s_tg = median(decode_rate);
    batched_steps.emplace_back(n, s_tg > 0.0 ? n / s_tg : 0.0);
    std::printf("%-10s %6d %6d %10.3f %10.1f   (prefill %.1f tok/s, decode %.1f tok/s)\n", "batched", n,
                n * (o.npp + o.ntg), t_all, s_total, n * o.npp / t_pp, s_tg);
    json << (i ? ", " : "") << "{\"npl\": " << n << ", \"npp\": " << o.npp << ", \"ntg\": " << o.ntg
         << ", \"s_total\": " << s_total << ", \"s_pp\": " << n * o.npp / t_pp << ", \"s_tg\": " << s_tg << "}";
  }
  json << "]";
  // The wire checksums' share of a decode step, here on one rank: a stage of a P-stage pipeline computes
  // about 1/P of the step and checks one message and seals one per step, so its share is P times this.
  batched_steps.insert(batched_steps.begin(), {1, decode_step});
  std::printf("wire checksum (CRC32C %s, f32 messages): seal + check of one message against the whole decode step\n",
              glacier::kernels::crc32c_variant());
  json << ", \"wire_checksum\": [";
  for (size_t i = 0; i < batched_steps.size(); ++i) {
    const auto [n, step] = batched_steps[i];
    const double crc = message_checksum_seconds(n, engine.config().n_embd);
    std::printf("  %3d tokens: step %.2f ms, message checksum %.2f us, seal + check %.4f%% of the step\n", n, step * 1e3,
                crc * 1e6, 100.0 * 2 * crc / step);
    json << (i ? ", " : "") << "{\"tokens\": " << n << ", \"step_s\": " << step << ", \"checksum_s\": " << crc << "}";
  }
  json << "]}\n";
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << json.str();
    if (!out) {
      std::fprintf(stderr, "bench_e2e: cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return 0;
}
