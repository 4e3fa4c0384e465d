// Phi-3 LongRoPE against llama.cpp: the shared synthetic phi3 model with rope_factors_long/short.weight,
// rope.scaling.attn_factor and rope.scaling.original_context_length added (as Phi-3 128k files carry them),
// once with an original context of 32 (the job's 512 exceeds it: long factors) and once of 4096 (short
// factors). References: tests/golden/data/phi3_longrope (README there has the commands).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/gguf_copy.h"
#include "common/greedy_dump_check.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace {

namespace gguf = glacier::gguf;

// F32 weights on both sides: float rounding of a 2-layer pass (synthetic_arch_golden_test's F32 bound;
// measured up to 5.3e-6 here). Long and short factors differ by far more (0.1 to 1 at the later positions).
constexpr double kF32Tolerance = 1e-4;

struct LongRopeCase {
  const char* name;          // tests/golden/data/phi3_longrope/<name>.json
  uint32_t original_ctx;     // phi3.rope.scaling.original_context_length
  const char* sha256;        // of the file written below, which llama.cpp read
};

const LongRopeCase kCases[] = {
    {"long", 32, "3cccd66cc7acbcfa12cad1eba9d492d9471151ff0fd2c6462d8dd7a217d9d71d"},
    {"short", 4096, "14f91d02cb71cd6847eb3e9b34507f328e150b7f327a04c2771323ab964f77f2"},
};

// n divisors rising linearly from `first` to `last`: the shape of Phi-3's published factor lists.
std::vector<uint8_t> divisors(int64_t n, float first, float last) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    const float v = first + (last - first) * static_cast<float>(i) / static_cast<float>(n - 1);
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof v);
  }
  return bytes;
}

// The base model plus the LongRoPE keys and, when `with_short`, both factor tensors (else only the long ones).
std::string write_longrope_model(const std::string& base_path, const LongRopeCase& c, bool with_short = true) {
  auto base = gguf::File::open(base_path);
  gguf::Writer w;
  glacier::testing::copy_keys(*base, w);
  w.set_u32("phi3.rope.scaling.original_context_length", c.original_ctx);
  w.set_f32("phi3.rope.scaling.attn_factor", 1.19f);
  glacier::testing::copy_tensors(*base, w);
  const int64_t pairs = static_cast<int64_t>(base->get_uint("phi3.rope.dimension_count")) / 2;
  w.add_tensor("rope_factors_long.weight", gguf::TensorType::F32, {pairs}, divisors(pairs, 1.0f, 8.0f));
  if (with_short) w.add_tensor("rope_factors_short.weight", gguf::TensorType::F32, {pairs}, divisors(pairs, 1.0f, 1.5f));
  const std::string path = glacier::testing::scratch_dir(std::string("phi3-longrope-") + c.name + (with_short ? "" : "-half")) +
                           "/model.gguf";
  w.write(path);
  return path;
}

class Phi3LongRopeGolden : public ::testing::TestWithParam<LongRopeCase> {};

TEST_P(Phi3LongRopeGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  const LongRopeCase& c = GetParam();
  GLACIER_REQUIRE_SHARED(base, "models/synthetic/synth-phi3-f32.gguf");
  const std::string path = write_longrope_model(base, c);
  const glacier::testing::GoldenRun run{path, c.sha256, std::string("phi3_longrope/") + c.name + ".json",
                                        std::string("phi3 longrope ") + c.name};
  glacier::testing::check_golden_run(run, {kF32Tolerance, kF32Tolerance}, [&](const glacier::model::ModelConfig& cfg) {
    EXPECT_EQ(cfg.rope_n_ctx_orig, static_cast<int32_t>(c.original_ctx));
  });
}

TEST(Phi3LongRope, AFileWithOnlyOneOfTheFactorTensorsIsRefusedNamingTheOther) {
  GLACIER_REQUIRE_SHARED(base, "models/synthetic/synth-phi3-f32.gguf");
  const std::string path = write_longrope_model(base, kCases[0], /*with_short=*/false);
  glacier::testing::expect_input_error(
      [&] {
        auto f = gguf::File::open(path);
        const glacier::model::ModelConfig cfg = glacier::model::read_model_config(*f);
        glacier::model::load_shard(*f, cfg, {0, cfg.n_layer}, true, true);
      },
      {"rope_factors_short.weight", path});
}

INSTANTIATE_TEST_SUITE_P(Factors, Phi3LongRopeGolden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
