// sha256_file and the cached digest a job records, on the shared models, against the digests their
// README publishes (the provenance that a results file records must be the one anyone can check with
// sha256sum).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "app/model_digest.h"
#include "app/sha256.h"
#include "common/test_env.h"

namespace glacier::app {
namespace {

// The sha256 column of the README's table row for `file`, "" when there is no such row.
std::string published_sha256(const std::string& readme, const std::string& file) {
  const std::regex row("\\| `" + file + "` \\|[^|]*\\| `([0-9a-f]{64})` \\|");
  std::smatch m;
  return std::regex_search(readme, m, row) ? m[1].str() : "";
}

TEST(Sha256Golden, SharedModelsMatchTheirPublishedDigests) {
  GLACIER_REQUIRE_SHARED(readme, "models/README.md");
  const std::string text = glacier::testing::read_text(readme);
  int checked = 0;
  for (const char* name : {"stories260K.gguf", "stories260K-q8_0.gguf"}) {
    const std::string expected = published_sha256(text, name);
    ASSERT_EQ(expected.size(), 64u) << "no sha256 for " << name << " in " << readme;
    const std::string path = glacier::testing::shared_path(std::string("models/") + name);
    ASSERT_FALSE(path.empty()) << name << " is listed in the README but missing";
    EXPECT_EQ(sha256_file(path), expected) << path;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(Sha256Golden, CachedDigestOfTheSharedModelIsThePublishedOne) {
  GLACIER_REQUIRE_SHARED(readme, "models/README.md");
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string expected = published_sha256(glacier::testing::read_text(readme), "stories260K.gguf");
  ASSERT_EQ(expected.size(), 64u) << "no sha256 for stories260K.gguf in " << readme;
  const std::string cache = glacier::testing::scratch_dir("sha256_golden_cache") + "/model-sha256";
  const FileDigest computed = cached_sha256_file(model, cache);
  EXPECT_FALSE(computed.from_cache);
  EXPECT_EQ(computed.sha256, expected);
  const FileDigest cached = cached_sha256_file(model, cache);
  EXPECT_TRUE(cached.from_cache);
  EXPECT_EQ(cached.sha256, expected);
}

}  // namespace
}  // namespace glacier::app
