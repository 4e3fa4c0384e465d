// The calibration run's fixed decisions (its token count at any --ubatch, the speed as seconds per
// weight byte per token) and one real run through a layer of stories260K: the layer, tokens and bytes
// it reports and a time that is a time (its size is the machine's, never asserted).
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "planning/calibration.h"
#include "util/thread_pool.h"

namespace {

using namespace glacier::planning;

TEST(PlanningCalibration, TokensAreKCalibrationTokensOrAMicroBatch) {
  EXPECT_EQ(calibration_tokens(512), 64);
  EXPECT_EQ(calibration_tokens(64), 64);
  EXPECT_EQ(calibration_tokens(16), 16);
  EXPECT_EQ(calibration_tokens(0), 1) << "at least one token";
}

TEST(PlanningCalibration, SpeedIsSecondsPerWeightBytePerToken) {
  Calibration c;
  c.tokens = 10;
  c.layer_bytes = 1000;
  c.seconds = 2.0;
  EXPECT_DOUBLE_EQ(c.seconds_per_work(), 2.0 / (1000.0 * 10.0));
  c.layer_bytes = 0;
  c.tokens = 0;
  EXPECT_DOUBLE_EQ(c.seconds_per_work(), 2.0) << "an empty layer or no tokens divide by one, never by zero";
}

TEST(PlanningCalibration, ARunReportsItsLayerTokensAndBytes) {
  GLACIER_REQUIRE_SHARED(path, "models/stories260K.gguf");
  const auto file = glacier::gguf::File::open(path);
  const glacier::model::ModelConfig cfg = glacier::model::read_model_config(*file);
  const glacier::model::WeightBytes bytes = glacier::model::weight_bytes(*file, cfg);
  ASSERT_GE(cfg.n_layer, 2);
  glacier::ThreadPool pool(1);
  const Calibration c = calibrate_rank(*file, cfg, bytes, 1, 512, pool, glacier::compute::ComputeThrottle());
  EXPECT_EQ(c.layer, 1);
  EXPECT_EQ(c.tokens, kCalibrationTokens);
  EXPECT_EQ(c.layer_bytes, bytes.per_layer[1]);
  EXPECT_TRUE(std::isfinite(c.seconds));
  EXPECT_GT(c.seconds, 0.0);
  EXPECT_EQ(calibrate_rank(*file, cfg, bytes, 0, 8, pool, glacier::compute::ComputeThrottle()).tokens, 8);
}

}  // namespace
