// RoPE scaling against llama.cpp: synthetic llama models trained for 64 positions (Llama 3 rope_freqs,
// linear and YaRN scaling) scored by perplexity at n_ctx 256, so most positions lie past the original
// context; references in tests/golden/data/rope_scaling (README there has the commands).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app/perplexity.h"
#include "app/sha256.h"
#include "common/engine_harness.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

namespace {

using glacier::testing::EngineHarness;

// llama-perplexity prints the running perplexity with 4 decimals (5e-5 of ~780: 6e-8 relative); measured
// differences are within that (largest 8.3e-8). 1e-6 leaves room for other summation orders (other ISAs)
// and is still 3000 times smaller than the smallest change a scaling makes here (0.3%).
constexpr double kRelativeTolerance = 1e-6;

const nlohmann::json& reference() {
  static const nlohmann::json j =
      glacier::testing::read_json(std::string(GLACIER_SOURCE_DIR) + "/tests/golden/data/rope_scaling/perplexity_c256.json");
  return j;
}

// The model llama.cpp scored: glacier_mkmodel --preset tiny --vocab-from stories260K.gguf --ctx 64 plus the extra args.
std::string make_model(const std::string& vocab, const nlohmann::json& m, const std::string& dir) {
  glacier::model::SyntheticModelSpec s;  // tiny preset
  s.vocab_from = vocab;
  s.n_ctx = 64;
  s.threads = 1;
  const auto args = m["mkmodel_extra_args"].get<std::vector<std::string>>();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--rope-freqs") {
      s.rope_freqs = true;
    } else if (args[i] == "--rope-scaling" && i + 1 < args.size()) {
      const std::string v = args[++i];
      s.rope_scaling_type = v.substr(0, v.find(':'));
      s.rope_scaling_factor = std::stof(v.substr(v.find(':') + 1));
    } else {
      ADD_FAILURE() << "unknown mkmodel argument in the reference: " << args[i];
    }
  }
  const std::string path = dir + "/" + m["name"].get<std::string>() + ".gguf";
  glacier::model::write_synthetic_model(s, path);
  return path;
}

// Running perplexity after each of the first n chunks, as llama-perplexity prints it.
std::vector<double> running_ppl(const std::string& model, const std::string& text, int32_t n_ctx, size_t n) {
  EngineHarness eng(model, n_ctx);
  auto tokens = eng.tok->encode(text, true, false);
  auto plan = glacier::app::plan_perplexity("ppl_text.txt", tokens, n_ctx, eng.tok->bos());
  plan.chunks.resize(n);
  auto outcomes = eng.run(plan.chunks);
  std::vector<std::vector<float>> lps;
  std::vector<double> out;
  for (auto& o : outcomes) {
    lps.push_back(o.target_logprobs);
    out.push_back(glacier::app::combine_perplexity(lps).ppl);
  }
  return out;
}

struct Scored {
  std::string name;
  std::vector<double> glacier, llama_cpp;
};

const std::vector<Scored>& scored() {
  static const std::vector<Scored> all = [] {
    std::vector<Scored> v;
    const auto vocab = glacier::testing::shared_path("models/stories260K.gguf");
    const auto text_path = glacier::testing::shared_path(reference()["text"].get<std::string>());
    const std::string text = glacier::testing::read_text(text_path);
    const std::string dir = glacier::testing::scratch_dir("rope_scaling");
    const auto n_ctx = reference()["n_ctx"].get<int32_t>();
    const auto n_chunks = reference()["n_chunks"].get<size_t>();
    for (const auto& m : reference()["models"]) {
      const std::string path = make_model(vocab, m, dir);
      // The same bytes llama.cpp read: the generator is deterministic and the reference records the hash.
      EXPECT_EQ(glacier::app::sha256_file(path), m["sha256"].get<std::string>()) << path;
      v.push_back({m["name"].get<std::string>(), running_ppl(path, text, n_ctx, n_chunks),
                   m["running_ppl"].get<std::vector<double>>()});
    }
    return v;
  }();
  return all;
}

TEST(RopeScalingGolden, PerplexityPastTheOriginalContextMatchesLlamaCpp) {
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  ASSERT_EQ(scored().size(), 4u);
  for (const Scored& s : scored()) {
    SCOPED_TRACE(s.name);
    ASSERT_EQ(s.glacier.size(), s.llama_cpp.size());
    for (size_t c = 0; c < s.glacier.size(); ++c)
      EXPECT_NEAR(s.glacier[c], s.llama_cpp[c], kRelativeTolerance * s.llama_cpp[c]) << "chunk " << c + 1;
  }
}

// Each scaling changes the result: none of them is silently a no-op (the base model has no scaling).
TEST(RopeScalingGolden, EachScalingChangesThePerplexity) {
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  ASSERT_EQ(scored().size(), 4u);
  const Scored& base = scored().front();
  ASSERT_EQ(base.name, "base");
  for (size_t i = 1; i < scored().size(); ++i) {
    SCOPED_TRACE(scored()[i].name);
    for (size_t c = 0; c < base.glacier.size(); ++c)
      EXPECT_GT(std::abs(scored()[i].glacier[c] - base.glacier[c]), 100 * kRelativeTolerance * base.glacier[c])
          << "chunk " << c + 1;
  }
}

}  // namespace
