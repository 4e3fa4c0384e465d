// Every shared model (real and synthetic) passes the nothing-ignored rule and loads whole, and the list
// of tensors the rule expects is exactly the set load_shard maps (so the two cannot drift apart).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/gguf_files.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/error.h"

namespace glacier::model {
namespace {

TEST(ModelFileCoverageShared, EverySharedModelLoadsAndUsesEveryTensor) {
  GLACIER_REQUIRE_SHARED(dir, "models");
  int models = 0;
  for (const std::string& path : glacier::testing::gguf_files_under(dir)) {
    if (path.find("/vocab/") != std::string::npos) continue;  // tokenizer-only files, no weights
    SCOPED_TRACE(path);
    auto f = gguf::File::open(path);
    ModelConfig cfg;
    ASSERT_NO_THROW(cfg = read_model_config(*f));
    ShardWeights w;
    ASSERT_NO_THROW(w = load_shard(*f, cfg, {0, cfg.n_layer}, true, true));
    std::set<std::string> mapped, expected, in_file;
    for (const gguf::TensorInfo* t : w.tensors) mapped.insert(t->name);
    for (const std::string& n : expected_tensor_names(*f, cfg)) expected.insert(n);
    for (const gguf::TensorInfo& t : f->tensors()) in_file.insert(t.name);
    EXPECT_EQ(mapped, expected);
    EXPECT_EQ(in_file, expected);
    ++models;
  }
  // models/README.md and models/synthetic/README.md: 4 stories260K files and 18 synthetic models.
  EXPECT_GE(models, 22);
}

}  // namespace
}  // namespace glacier::model
