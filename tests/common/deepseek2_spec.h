// The V3-shaped synthetic deepseek2 model of the golden and job tests (low-rank q, sigmoid gating with
// the selection bias, normalised and scaled expert weights, YaRN with the log multiplier), one definition
// so both tests run the model the llama.cpp reference was made from.
#pragma once
#include <string>

#include "model/synthetic_model.h"

namespace glacier::testing {

inline model::SyntheticModelSpec deepseek2_v3_spec(const std::string& vocab) {
  model::SyntheticModelSpec s = model::synthetic_preset("tiny");
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
  s.n_vocab = 0;
  s.vocab_from = vocab;
  return s;
}

}  // namespace glacier::testing
