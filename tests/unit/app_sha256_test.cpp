// SHA-256 against the FIPS 180-2 / NIST example vectors, split updates across block boundaries, and
// files larger than the 1 MiB read chunk checked against coreutils' independent sha256sum.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "app/sha256.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "util/error.h"

namespace glacier::app {
namespace {

using glacier::testing::expect_input_error;

// Published digests (FIPS 180-2 appendix B and the NIST example values).
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kTwoBlock = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* kMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
const std::string kTwoBlockMessage = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

TEST(AppSha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("abc"), kAbc);
  EXPECT_EQ(sha256_hex(""), kEmpty);
  ASSERT_EQ(kTwoBlockMessage.size(), 56u);  // padding needs a second block: the length no longer fits
  EXPECT_EQ(sha256_hex(kTwoBlockMessage), kTwoBlock);
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), kMillionA);
}

TEST(AppSha256, SplitUpdatesGiveTheSameDigest) {
  for (size_t piece = 1; piece <= 65; ++piece) {
    Sha256 hash;
    for (size_t at = 0; at < kTwoBlockMessage.size(); at += piece)
      hash.update(kTwoBlockMessage.data() + at, std::min(piece, kTwoBlockMessage.size() - at));
    EXPECT_EQ(Sha256::to_hex(hash.finish()), kTwoBlock) << "pieces of " << piece << " bytes";
  }
  Sha256 reused;  // finish() resets, so the next message starts clean
  reused.update("xyz", 3);
  reused.finish();
  reused.update("abc", 3);
  EXPECT_EQ(Sha256::to_hex(reused.finish()), kAbc);
}

TEST(AppSha256, FileOfAMillionA) {
  const std::string path = glacier::testing::scratch_dir("sha256") + "/a.bin";
  write_file(path, std::string(1000000, 'a'));
  EXPECT_EQ(sha256_file(path), kMillionA);
}

TEST(AppSha256, FilesAcrossChunkBoundariesMatchSha256sum) {
  if (std::system("command -v sha256sum >/dev/null 2>&1") != 0) GTEST_SKIP() << "needs coreutils sha256sum";
  const std::string dir = glacier::testing::scratch_dir("sha256sum");
  std::mt19937 rng(12345);
  // Around the 1 MiB read chunk and a multi-chunk size whose tail is not block aligned.
  for (size_t size : {size_t{1} << 20, (size_t{1} << 20) + 1, (size_t{1} << 20) - 1, size_t{3} * (1 << 20) + 77}) {
    std::string bytes(size, '\0');
    for (auto& b : bytes) b = static_cast<char>(rng() & 0xff);
    const std::string path = dir + "/r" + std::to_string(size) + ".bin";
    write_file(path, bytes);
    const std::string out = dir + "/sum.txt";
    ASSERT_EQ(std::system(("sha256sum '" + path + "' > '" + out + "'").c_str()), 0);
    const std::string expected = glacier::testing::read_text(out).substr(0, 64);
    EXPECT_EQ(sha256_file(path), expected) << size << " bytes";
  }
}

TEST(AppSha256, MissingFileIsAnInputErrorNamingIt) {
  const std::string path = glacier::testing::scratch_dir("sha256missing") + "/nope.gguf";
  expect_input_error([&] { sha256_file(path); }, {path});
}

}  // namespace
}  // namespace glacier::app
