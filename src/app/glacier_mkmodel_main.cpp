// glacier_mkmodel: writes a llama-architecture (or granite, gemma2, deepseek2, qwen3moe) GGUF model with seeded random
// weights, so a job can run with no downloaded model and benchmarks can use real sizes (presets or custom shapes).
#include <boost/program_options.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "app/tool_command_line.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace {

constexpr uint64_t kProgressMinBytes = uint64_t{256} << 20;  // smaller models finish before it matters

struct Request {
  glacier::model::SyntheticModelSpec spec;
  std::string out;
};

std::optional<Request> parse(int argc, char** argv) {
  std::string preset = "tiny", type = "f32", out, vocab_from, name;
  int32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, ctx = 2048;
  float rope_base = 10000.0f;
  bool rope_freqs = false;
  std::string rope_scaling, arch = "llama";
  int32_t sliding_window = 0;
  float attn_softcap = 50.0f, final_softcap = 30.0f;
  uint64_t seed = 1;
  int threads = 0;
  glacier::model::SyntheticModelSpec::DeepSeek ds;
  glacier::model::SyntheticModelSpec::Granite granite;
  int32_t head_dim = 0;
  std::string expert_gating = "softmax";
  po::options_description opts(
      "usage: glacier_mkmodel [--preset tiny|llama-1b|llama-7b|qwen3moe-1.4b] [--type T] [--seed N] --out PATH\n\n"
      "Writes a llama (or granite, gemma2, deepseek2, qwen3moe) GGUF model with random weights (entries ~ N(0,1)/sqrt(row length)); the same options\n"
      "give the same bytes. Explicit shape options override the preset");
  opts.add_options()
      ("help,h", "print this help")
      ("arch", po::value(&arch)->default_value(arch), "llama | granite (llama's tensors, four scale keys) | gemma2 (tied head, post-norms, soft-caps; llama.cpp knows only\n  26, 42 and 46 layers) | deepseek2 (latent attention, shared + routed experts) | qwen3moe (q/k norms, routed experts\n  in every layer; --n-ff is written as feed_forward_length only)")
      ("sliding-window", po::value(&sliding_window), "gemma2: attention.sliding_window of the even layers (default: key absent, 4096)")
      ("attn-softcap", po::value(&attn_softcap)->default_value(attn_softcap), "gemma2: attn_logit_softcapping")
      ("final-softcap", po::value(&final_softcap)->default_value(final_softcap), "gemma2: final_logit_softcapping")
      ("embedding-scale", po::value(&granite.embedding_scale)->default_value(granite.embedding_scale), "granite: embedding_scale")
      ("residual-scale", po::value(&granite.residual_scale)->default_value(granite.residual_scale), "granite: residual_scale")
      ("attention-scale", po::value(&granite.attention_scale)->default_value(granite.attention_scale), "granite: attention.scale")
      ("logit-scale", po::value(&granite.logit_scale)->default_value(granite.logit_scale), "granite: logit_scale (logits divided by it)")
      ("q-lora-rank", po::value(&ds.q_lora_rank)->default_value(ds.q_lora_rank), "deepseek2: attention.q_lora_rank (0: plain attn_q;\n  llama.cpp ties 0 to 27 layers). Latent attention shapes: kv_lora_rank 32, rope 16 + nope 32 per q/k\n  head, v 32; 1 shared expert, 1 leading dense layer")
      ("n-expert", po::value(&ds.n_expert)->default_value(ds.n_expert), "deepseek2, qwen3moe: routed experts a MoE layer")
      ("n-expert-used", po::value(&ds.n_expert_used)->default_value(ds.n_expert_used), "deepseek2, qwen3moe: experts a token is routed to (top k)")
      ("n-ff-expert", po::value(&ds.n_ff_expert)->default_value(ds.n_ff_expert), "deepseek2, qwen3moe: feed-forward width of an expert")
      ("head-dim", po::value(&head_dim), "qwen3moe: attention head width, written as attention.key_length and value_length\n  (default n_embd / n_head)")
      ("expert-gating", po::value(&expert_gating)->default_value(expert_gating), "deepseek2: softmax | sigmoid (expert_gating_func)")
      ("expert-weights-norm", po::bool_switch(&ds.weights_norm), "deepseek2: expert_weights_norm = true")
      ("expert-weights-scale", po::value(&ds.weights_scale)->default_value(ds.weights_scale), "deepseek2: expert_weights_scale")
      ("exp-probs-b", po::bool_switch(&ds.exp_probs_b), "deepseek2: write the experts' selection bias exp_probs_b.bias")
      ("yarn-log-multiplier", po::value(&ds.yarn_log_multiplier)->default_value(ds.yarn_log_multiplier), "deepseek2: rope.scaling.yarn_log_multiplier")
      ("preset", po::value(&preset)->default_value(preset), "tiny (64 wide, 2 layers, own vocab) | llama-1b | llama-7b |\n"
       "  qwen3moe-1.4b (arch qwen3moe: 1024 wide, 24 layers, 16 heads / 4 KV heads of 128, 64 experts of 256, top 8;\n"
       "  1.40 G parameters, 1.49 GB (1.39 GiB) at --type q8_0 with a 32000-token vocabulary)")
      ("n-embd", po::value(&n_embd), "embedding width")
      ("n-layer", po::value(&n_layer), "transformer blocks")
      ("n-head", po::value(&n_head), "attention heads")
      ("n-head-kv", po::value(&n_head_kv), "key/value heads (a divisor of --n-head)")
      ("n-ff", po::value(&n_ff), "feed-forward width")
      ("n-vocab", po::value(&n_vocab), "vocabulary size (built-in vocabulary cut or padded to it)")
      ("type", po::value(&type)->default_value(type), "2-D weight type: f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | iq4_nl | iq4_xs | q2_k | q3_k |\n  q4_k | q5_k | q6_k, or a K-quant mix with llama-quantize's per-tensor types: q3_k_s | q3_k_m | q3_k_l |\n  q4_k_s | q4_k_m | q5_k_s | q5_k_m (llama, granite, qwen3moe). Norms and MoE routers stay f32; stacked\n  experts are quantized row by row. Row lengths must be multiples of the block (32; 256 for iq4_xs and the\n  K types): --n-embd and --n-ff, for qwen3moe --n-embd, n_head x head_dim and --n-ff-expert")
      ("seed", po::value(&seed)->default_value(seed), "random seed of the weights")
      ("vocab-from", po::value(&vocab_from), "copy every tokenizer.* key from this GGUF file (n_vocab = its token count)")
      ("ctx", po::value(&ctx)->default_value(ctx), "ARCH.context_length")
      ("rope-base", po::value(&rope_base)->default_value(rope_base, "10000"), "ARCH.rope.freq_base")
      ("rope-freqs", po::bool_switch(&rope_freqs), "write rope_freqs.weight (Llama 3 style divisors, 1 rising to 8)")
      ("rope-scaling", po::value(&rope_scaling), "linear:FACTOR | yarn:FACTOR (ARCH.rope.scaling.* keys)")
      ("name", po::value(&name), "general.name (default glacier-synthetic[-PRESET])")
      ("threads,t", po::value(&threads)->default_value(threads), "generator threads (0 = all; the bytes do not depend on it)")
      ("out,o", po::value(&out), "output GGUF file (required)");
  const std::optional<po::variables_map> options = glacier::app::parse_tool_command_line(argc, argv, opts);
  if (!options) return std::nullopt;  // --help
  const po::variables_map& vm = *options;
  if (out.empty()) throw glacier::InputError("option --out: expected an output file path, found nothing (the option is required)");

  Request r;
  r.out = out;
  glacier::model::SyntheticModelSpec& s = r.spec;
  s = glacier::model::synthetic_preset(preset);
  if (vm.count("n-embd")) s.n_embd = n_embd;
  if (vm.count("n-layer")) s.n_layer = n_layer;
  if (vm.count("n-head")) s.n_head = n_head;
  if (vm.count("n-head-kv")) s.n_head_kv = n_head_kv;
  if (vm.count("n-ff")) s.n_ff = n_ff;
  // A vocabulary file decides the size unless --n-vocab is given too (then the two must agree).
  if (vm.count("n-vocab")) {
    s.n_vocab = n_vocab;
  } else if (!vocab_from.empty()) {
    s.n_vocab = 0;
  }
  if (vm.count("n-vocab") && n_vocab == 0)
    throw glacier::InputError("option --n-vocab: expected a vocabulary size >= 259, found 0");
  if (vm.count("name")) s.name = name;
  glacier::model::set_synthetic_type(s, type);
  s.seed = seed;
  s.vocab_from = vocab_from;
  s.n_ctx = ctx;
  s.rope_base = rope_base;
  s.rope_freqs = rope_freqs;
  if (vm.count("rope-scaling")) {
    const size_t colon = rope_scaling.find(':');
    if (colon == std::string::npos)
      throw glacier::InputError("option --rope-scaling: expected TYPE:FACTOR (linear:4, yarn:4), found '" + rope_scaling + "'");
    s.rope_scaling_type = rope_scaling.substr(0, colon);
    const std::string factor = rope_scaling.substr(colon + 1);
    char* end = nullptr;
    s.rope_scaling_factor = std::strtof(factor.c_str(), &end);
    if (factor.empty() || *end != '\0')
      throw glacier::InputError("option --rope-scaling: expected a number after ':', found '" + factor + "'");
  }
  s.threads = threads;
  // A preset of another architecture (qwen3moe-1.4b) decides it; --arch may repeat it, not change it.
  if (s.arch != "llama" && !vm["arch"].defaulted() && arch != s.arch)
    throw glacier::InputError("option --arch: expected " + s.arch + " with --preset " + preset + ", found " + arch);
  if (!vm["arch"].defaulted()) s.arch = arch;
  arch = s.arch;
  s.sliding_window = sliding_window;
  s.attn_softcap = attn_softcap;
  s.final_softcap = final_softcap;
  if (arch == "deepseek2") {
    if (expert_gating != "softmax" && expert_gating != "sigmoid")
      throw glacier::InputError("option --expert-gating: expected softmax or sigmoid, found '" + expert_gating + "'");
    ds.sigmoid_gating = expert_gating == "sigmoid";
    s.deepseek = ds;
    if (!vm.count("n-head-kv")) s.n_head_kv = s.n_head;  // latent attention has one key and value per head
  } else {
    for (const char* o : {"q-lora-rank", "expert-gating", "expert-weights-scale", "yarn-log-multiplier"})
      if (!vm[o].defaulted())
        throw glacier::InputError(std::string("option --") + o + ": expected only with --arch deepseek2, found --arch " + arch);
    if (ds.weights_norm || ds.exp_probs_b)
      throw glacier::InputError("options --expert-weights-norm / --exp-probs-b: expected only with --arch deepseek2, found --arch " + arch);
  }
  if (arch == "qwen3moe") {
    // The expert options mean the same as for deepseek2; a preset's figures stand unless given.
    if (!vm["n-expert"].defaulted()) s.qwen3moe.n_expert = ds.n_expert;
    if (!vm["n-expert-used"].defaulted()) s.qwen3moe.n_expert_used = ds.n_expert_used;
    if (!vm["n-ff-expert"].defaulted()) s.qwen3moe.n_ff_expert = ds.n_ff_expert;
    if (vm.count("head-dim")) s.qwen3moe.head_dim = head_dim;
  } else {
    if (vm.count("head-dim"))
      throw glacier::InputError("option --head-dim: expected only with --arch qwen3moe, found --arch " + arch);
    if (arch != "deepseek2")
      for (const char* o : {"n-expert", "n-expert-used", "n-ff-expert"})
        if (!vm[o].defaulted())
          throw glacier::InputError(std::string("option --") + o + ": expected only with --arch deepseek2 or qwen3moe, found --arch " + arch);
  }
  s.granite = granite;
  if (arch != "granite")
    for (const char* o : {"embedding-scale", "residual-scale", "attention-scale", "logit-scale"})
      if (!vm[o].defaulted())
        throw glacier::InputError(std::string("option --") + o + ": expected only with --arch granite, found --arch " + arch);
  if (arch != "gemma2" && (!vm["attn-softcap"].defaulted() || !vm["final-softcap"].defaulted()))
    throw glacier::InputError("options --attn-softcap / --final-softcap: expected only with --arch gemma2, found --arch " + arch);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<Request> r = parse(argc, argv);
    if (!r) return 0;
    int last_tenth = 0;
    auto progress = [&](const std::string& tensor, uint64_t done, uint64_t total) {
      if (total < kProgressMinBytes) return;
      const int tenth = static_cast<int>(done * 10 / total);
      if (tenth == last_tenth) return;
      last_tenth = tenth;
      std::fprintf(stderr, "glacier_mkmodel: %3d%% (%s)\n", tenth * 10, tensor.c_str());
    };
    const auto summary = glacier::model::write_synthetic_model(r->spec, r->out, progress);
    std::printf("wrote %s\n", r->out.c_str());
    std::printf("parameters: %llu (%.2f M), vocabulary %d tokens\n", static_cast<unsigned long long>(summary.n_params),
                static_cast<double>(summary.n_params) / 1e6, summary.n_vocab);
    std::printf("file size: %llu bytes (%.2f MiB)\n", static_cast<unsigned long long>(summary.file_bytes),
                static_cast<double>(summary.file_bytes) / (1024.0 * 1024.0));
    return 0;
  } catch (const glacier::InputError& e) {
    std::fprintf(stderr, "glacier_mkmodel: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "glacier_mkmodel: internal error: %s\n", e.what());
    return 1;
  }
}
