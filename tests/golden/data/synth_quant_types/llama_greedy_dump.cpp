// Reference producer for synth_quant_types_golden_test (built by hand against llama.cpp, see README.md):
// for each prompt (token ids, one prompt a line) decodes the prompt as one batch, then greedy-generates
// up to N tokens one decode at a time, and prints JSON with the top-5 logits at every prompt position and step.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

struct Ranked {
  std::vector<std::pair<int, float>> top;  // best first
  float margin = 0.0f;                     // best minus second best
};

Ranked rank(const float* logits, int n_vocab) {
  std::vector<int> ids(n_vocab);
  for (int i = 0; i < n_vocab; ++i) ids[i] = i;
  std::partial_sort(ids.begin(), ids.begin() + 5, ids.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  Ranked r;
  for (int k = 0; k < 5; ++k) r.top.emplace_back(ids[k], logits[ids[k]]);
  r.margin = logits[ids[0]] - logits[ids[1]];
  return r;
}

std::string top_json(const Ranked& r) {
  std::string s = "[";
  char buf[64];
  for (size_t k = 0; k < r.top.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%s[%d, %.9g]", k ? ", " : "", r.top[k].first, r.top[k].second);
    s += buf;
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL PROMPTS N_GEN\n", argv[0]);
    return 2;
  }
  const int n_gen = std::stoi(argv[3]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::ifstream in(argv[2]);
  std::string line;
  std::printf("[\n");
  bool first_case = true;
  while (std::getline(in, line)) {
    std::vector<llama_token> prompt;
    std::istringstream ls(line);
    for (int id; ls >> id;) prompt.push_back(id);
    if (prompt.empty()) continue;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.flash_attn = false;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    llama_batch batch = llama_batch_init(512, 0, 1);
    batch.n_tokens = static_cast<int>(prompt.size());
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.token[i] = prompt[i];
      batch.pos[i] = static_cast<llama_pos>(i);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    if (llama_decode(ctx, batch) != 0) return 1;
    std::string prompt_top = "[";
    for (size_t i = 0; i < prompt.size(); ++i)
      prompt_top += (i ? ",\n    " : "") + top_json(rank(llama_get_logits_ith(ctx, static_cast<int>(i)), n_vocab));
    prompt_top += "]";
    std::vector<int> generated;
    std::string steps = "[";
    const float* logits = llama_get_logits_ith(ctx, static_cast<int>(prompt.size()) - 1);
    for (int step = 0; step < n_gen; ++step) {
      const Ranked r = rank(logits, n_vocab);
      const int next = r.top[0].first;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s{\"id\": %d, \"margin\": %.9g, \"top5\": ", step ? ",\n    " : "", next,
                    r.margin);
      steps += buf + top_json(r) + "}";
      generated.push_back(next);
      if (llama_vocab_is_eog(vocab, next) || step + 1 == n_gen) break;
      batch.n_tokens = 1;
      batch.token[0] = next;
      batch.pos[0] = static_cast<llama_pos>(prompt.size() + step);
      batch.logits[0] = 1;
      if (llama_decode(ctx, batch) != 0) return 1;
      logits = llama_get_logits_ith(ctx, 0);
    }
    steps += "]";
    std::string ids, gen;
    for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? ", " : "") + std::to_string(prompt[i]);
    for (size_t i = 0; i < generated.size(); ++i) gen += (i ? ", " : "") + std::to_string(generated[i]);
    std::printf("%s  {\"prompt_ids\": [%s], \"n_vocab\": %d,\n   \"prompt_top5\": %s,\n   \"generated_ids\": [%s],\n"
                "   \"steps\": %s}",
                first_case ? "" : ",\n", ids.c_str(), n_vocab, prompt_top.c_str(), gen.c_str(), steps.c_str());
    first_case = false;
    llama_batch_free(batch);
    llama_free(ctx);
  }
  std::printf("\n]\n");
  llama_model_free(model);
  return 0;
}
