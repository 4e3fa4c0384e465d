// The model digest cache: a file is hashed once and then read from the cache while it is unchanged;
// a changed file, a corrupt cache or an unwritable one only cost a correct rehash; the cache's place
// follows $XDG_CACHE_HOME and $HOME.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "app/model_digest.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "util/error.h"

namespace glacier::app {
namespace {

using glacier::testing::expect_input_error;

namespace fs = std::filesystem;

// Published digests (FIPS 180-2 appendix B): one million 'a', and "abc".
constexpr const char* kMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const std::string kZeros(64, '0');

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

// Replaces every cached digest by `digest`, keeping each line's key: a lookup that returns it must
// have come from the cache.
void forge_cached_digests(const std::string& cache, const std::string& digest) {
  std::string text = glacier::testing::read_text(cache);
  text = std::regex_replace(text, std::regex("\\b[0-9a-f]{64}\\b"), digest);
  write_file(cache, text);
}

TEST(AppModelDigest, HashedOnceThenReadFromTheCacheWhileTheFileIsUnchanged) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_once");
  const std::string model = dir + "/model.gguf", cache = dir + "/cache/glacier/model-sha256";
  write_file(model, std::string(1000000, 'a'));

  const FileDigest first = cached_sha256_file(model, cache);
  EXPECT_EQ(first.sha256, kMillionA);
  EXPECT_FALSE(first.from_cache);
  ASSERT_TRUE(fs::exists(cache)) << "the first hash must be recorded";

  forge_cached_digests(cache, kZeros);
  const FileDigest second = cached_sha256_file(model, cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.sha256, kZeros) << "an unchanged file must not be read again";

  write_file(model, "abc");  // rewritten in place: same inode, new size and times
  const FileDigest changed = cached_sha256_file(model, cache);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_EQ(changed.sha256, kAbc);
  EXPECT_TRUE(cached_sha256_file(model, cache).from_cache) << "the new state is cached in turn";
}

TEST(AppModelDigest, SameSizeRewriteIsNotTakenForTheCachedFile) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_same_size");
  const std::string model = dir + "/model.gguf", cache = dir + "/model-sha256";
  write_file(model, "xyz");
  ASSERT_FALSE(cached_sha256_file(model, cache).from_cache);
  // Rewrite with the same size and put the old modification time back: the status-change time moves.
  const auto mtime = fs::last_write_time(model);
  write_file(model, "abc");
  fs::last_write_time(model, mtime);
  const FileDigest again = cached_sha256_file(model, cache);
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(again.sha256, kAbc);
}

TEST(AppModelDigest, CorruptCacheLinesAreIgnoredAndReplaced) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_corrupt");
  const std::string model = dir + "/model.gguf", cache = dir + "/model-sha256";
  write_file(model, "abc");
  ASSERT_FALSE(cached_sha256_file(model, cache).from_cache);
  const std::string good = glacier::testing::read_text(cache);
  const std::string entry = good.substr(good.find('\n') + 1);
  const std::string key = entry.substr(0, entry.find(kAbc));  // "device inode size mtime ctime "
  for (const std::string& bad : {key + "12345\n",                                       // digest cut short
                                 key + std::string(64, 'g') + " x\n",                    // not hex
                                 key.substr(0, key.size() / 2) + "\n",                   // key cut short
                                 std::string("\x01\xff garbage\n"),
                                 std::string()}) {                                      // empty cache
    write_file(cache, good.substr(0, good.find('\n') + 1) + bad);
    const FileDigest digest = cached_sha256_file(model, cache);
    EXPECT_FALSE(digest.from_cache) << "line: " << bad;
    EXPECT_EQ(digest.sha256, kAbc) << "line: " << bad;
  }
  write_file(cache, "not a cache at all\n" + entry);  // a right entry under a wrong format line
  EXPECT_FALSE(cached_sha256_file(model, cache).from_cache);
  EXPECT_TRUE(cached_sha256_file(model, cache).from_cache) << "the rewritten cache must be usable";
}

TEST(AppModelDigest, UnwritableCacheOnlyCostsARehash) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_unwritable");
  const std::string model = dir + "/model.gguf";
  write_file(model, "abc");
  write_file(dir + "/blocker", "a file where the cache folder would go");
  const std::string cache = dir + "/blocker/glacier/model-sha256";
  for (int run = 0; run < 2; ++run) {
    FileDigest digest;
    ASSERT_NO_THROW(digest = cached_sha256_file(model, cache));
    EXPECT_EQ(digest.sha256, kAbc);
    EXPECT_FALSE(digest.from_cache);
  }
  const FileDigest uncached = cached_sha256_file(model, "");
  EXPECT_EQ(uncached.sha256, kAbc);
}

// A long hash reports as it goes (the start-up watchdog must hear from rank 0 while it hashes a model
// of hundreds of GB); a cache hit reports nothing, there being nothing to wait for.
TEST(AppModelDigest, AComputationReportsItsProgressAndACacheHitDoesNot) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_progress");
  constexpr uint64_t kBytes = (uint64_t{200} << 20) + 12345;  // a few 64 MiB reports and a tail
  {
    std::ofstream out(dir + "/big.bin", std::ios::binary | std::ios::trunc);
    const std::string block(1 << 20, 'x');
    for (uint64_t done = 0; done < kBytes; done += block.size())
      out.write(block.data(), static_cast<std::streamsize>(std::min<uint64_t>(block.size(), kBytes - done)));
  }
  fs::remove(dir + "/cache");
  std::vector<std::pair<uint64_t, uint64_t>> reports;
  auto record = [&](uint64_t done, uint64_t total) { reports.emplace_back(done, total); };
  const FileDigest first = cached_sha256_file(dir + "/big.bin", dir + "/cache", record);
  EXPECT_FALSE(first.from_cache);
  ASSERT_EQ(reports.size(), 3u) << "one report per 64 MiB hashed";
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].first, (i + 1) * (uint64_t{64} << 20));
    EXPECT_EQ(reports[i].second, kBytes);
  }
  reports.clear();
  const FileDigest second = cached_sha256_file(dir + "/big.bin", dir + "/cache", record);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.sha256, first.sha256);
  EXPECT_TRUE(reports.empty());
}

TEST(AppModelDigest, MissingModelIsAnInputErrorNamingIt) {
  const std::string dir = glacier::testing::scratch_dir("model_digest_missing");
  const std::string model = dir + "/nope.gguf";
  expect_input_error([&] { cached_sha256_file(model, dir + "/model-sha256"); }, {model});
}

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(AppModelDigest, CacheLivesUnderXdgCacheHomeElseHome) {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg"), home("HOME", "/home/u");
    EXPECT_EQ(model_digest_cache_path(), "/tmp/xdg/glacier/model-sha256");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", ""), home("HOME", "/home/u");
    EXPECT_EQ(model_digest_cache_path(), "/home/u/.cache/glacier/model-sha256");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr), home("HOME", nullptr);
    EXPECT_EQ(model_digest_cache_path(), "");
  }
}

}  // namespace
}  // namespace glacier::app
