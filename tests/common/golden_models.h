// The synthetic models behind the llama.cpp references in tests/golden/data, one definition each (the spec,
// the SHA-256 of the file it writes, the reference file), shared by the in-process golden tests and the
// job-level one (tests/mpi/job_golden_test.cpp), so every test runs the very model llama.cpp read.
#pragma once
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/synthetic_model.h"

namespace glacier::testing {

struct GoldenModel {
  std::string label;               // names the model in messages
  model::SyntheticModelSpec spec;  // what glacier_mkmodel writes for it
  std::string sha256;              // of that file: if the generator changes, it is no longer the referenced model
  std::string reference;           // the llama_greedy_dump JSON, relative to tests/golden/data
};

inline std::string golden_data_dir() { return std::string(GLACIER_SOURCE_DIR) + "/tests/golden/data"; }

// glacier_mkmodel's tiny preset with a copied vocabulary.
inline model::SyntheticModelSpec tiny_with_vocab(const std::string& vocab) {
  model::SyntheticModelSpec s = model::synthetic_preset("tiny");
  s.n_vocab = 0;
  s.vocab_from = vocab;
  return s;
}

// V3-shaped deepseek2: low-rank q, sigmoid gating with the selection bias, normalised and scaled expert
// weights, YaRN with the log multiplier.
inline GoldenModel deepseek2_v3_golden(const std::string& vocab) {
  model::SyntheticModelSpec s = tiny_with_vocab(vocab);
  s.arch = "deepseek2";
  s.n_layer = 4;
  s.n_head_kv = s.n_head;
  s.deepseek.sigmoid_gating = true;
  s.deepseek.exp_probs_b = true;
  s.deepseek.weights_norm = true;
  s.deepseek.weights_scale = 2.5f;
  s.deepseek.yarn_log_multiplier = 0.1f;
  s.rope_scaling_type = "yarn";
  s.rope_scaling_factor = 4.0f;
  return {"synth deepseek2 (V3-shaped)", s, "e35e6f2d371ddf42200f745de577f6f161e851b40ab133c7cb4b2ed27e4af2ae",
          "deepseek2/v3.json"};
}

// Gemma 2 with 26 layers (a size llama.cpp knows, so its attention scale is defined), a window of 8 on the
// even layers and scores soft-capped at 2 (small enough to bend these scores; at 50 it would not).
inline GoldenModel gemma2_golden(const std::string& vocab) {
  model::SyntheticModelSpec s = tiny_with_vocab(vocab);
  s.arch = "gemma2";
  s.n_layer = 26;
  s.sliding_window = 8;
  s.attn_softcap = 2.0f;
  return {"synth gemma2", s, "77cfba96e9991e5078fadd26447cc40cba268c2446479860f0a202fcd8a4037f", "gemma2/gemma2.json"};
}

// The four Granite scales of the golden granite and granitemoe files, each set so that it moves llama.cpp's
// logits (data/granite/README.md).
inline constexpr model::SyntheticModelSpec::Granite kGoldenGraniteScales{
    .embedding_scale = 4.0f, .residual_scale = 0.5f, .attention_scale = 0.2f, .logit_scale = 0.5f};

// Granite with the golden scales.
inline GoldenModel granite_golden(const std::string& vocab) {
  model::SyntheticModelSpec s = tiny_with_vocab(vocab);
  s.arch = "granite";
  s.n_layer = 3;
  s.granite = kGoldenGraniteScales;
  return {"synth granite", s, "f0d24c5548cd7e5d56a4dd287933e9666bcdf0f9a701d41f2997a657c401bd47", "granite/granite.json"};
}

// The weight types glacier_mkmodel quantizes itself, on the tiny llama (data/synth_quant_types).
struct QuantCase {
  const char* type;    // glacier_mkmodel --type
  const char* sha256;  // of the model file the references were made from
  int32_t n_embd = 0;  // non-zero: --n-embd and --n-ff over the tiny preset (IQ4_XS and K types need multiples of 256)
  int32_t n_ff = 0;
  uint64_t seed = 1;   // --seed
};

inline void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.type; }

inline const std::vector<QuantCase>& synth_quant_cases() {
  static const std::vector<QuantCase> cases = {
      {"q4_1", "e6f3b2449817d346adac3d93e09e3ebb4a60bd85c3d78b402bd712780fb2af35"},
      {"q5_0", "3c2a1bee72e74b6958aa8fde9c5ce29a51edefc0480051711613a0416a8ccd30"},
      {"q5_1", "cfec42291db8116eb393d6cd6a90d5cc4c40895374c306359bb38f208c8f8c90"},
      {"iq4_nl", "df97811f9fd192cf78c4b5c2672db3984a494570869635d1e44cdcbfad9eb255"},
      {"iq4_xs", "98383686e6be75de7e03f18449295031d3a435c5f893d6849a4357a1bd60cdbd", 256, 512},
      // Q2_K at seed 2: with seed 1 the BOS row, the first of every prompt, has a rounding flip (logits off
      // by 0.035 from the first position on), which the golden test cannot tell from a wrong kernel.
      {"q2_k", "dd6e9c4c90ce1af4691e3dee3e18d0c7bb145005e482c6cb9f5a3f0a06154e2d", 256, 512, 2},
      {"q3_k", "914765221018e6893710a7cde92a2aea26677bd85e2e238abf6e23b686bb05e0", 256, 512},
      // llama-quantize's mixes: Q3_K..Q6_K tensors side by side in one file (k_quant_mix.h).
      {"q3_k_m", "1feca316a8cc741535afa23f9c2634da2be9861be972d1ab88f336487e077a60", 256, 512},
      {"q4_k_m", "c49aab57675340614540f677c6f08bd61dee5e2621bf619e228ad99c4a361088", 256, 512},
      {"q5_k_m", "81f0f8ba77f75406af25bed1dd791b9fa9892dcecdbaa3e5783f832bfb013cc9", 256, 512},
  };
  return cases;
}

inline const QuantCase& synth_quant_case(const std::string& type) {
  for (const QuantCase& c : synth_quant_cases())
    if (type == c.type) return c;
  throw std::invalid_argument("no synthetic quant golden for type " + type);
}

inline GoldenModel synth_quant_golden(const std::string& vocab, const QuantCase& qc) {
  model::SyntheticModelSpec s = tiny_with_vocab(vocab);
  model::set_synthetic_type(s, qc.type);
  s.seed = qc.seed;
  if (qc.n_embd) {
    s.n_embd = qc.n_embd;
    s.n_ff = qc.n_ff;
  }
  return {std::string("synth ") + qc.type, s, qc.sha256, std::string("synth_quant_types/") + qc.type + ".json"};
}

}  // namespace glacier::testing
