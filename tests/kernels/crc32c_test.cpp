// CRC32C: both variants against the published check values (RFC 3720 B.4 and the usual "123456789"),
// the SSE4.2 variant against the portable twin on seeded random buffers of every length and alignment,
// and checksums computed in pieces against one pass.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/crc32c.h"
#include "kernels/dispatch.h"

namespace glacier::kernels {
namespace {

using CrcFn = uint32_t (*)(const void*, size_t, uint32_t);

struct Variant {
  const char* name;
  CrcFn fn;
};

std::vector<Variant> variants() {
  std::vector<Variant> v{{"portable", crc32c_portable}};
  if (cpu_has_crc32c()) v.push_back({"sse4.2", crc32c_sse42});
  return v;
}

// Every length up to this, at every offset within an 8-byte word: covers the SSE4.2 variant's rounds of
// three interleaved 256-byte streams (up to three rounds), its 8-byte steps and every tail length.
constexpr size_t kMaxLength = 2400;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

TEST(Crc32c, PublishedCheckValues) {
  const std::string digits = "123456789";
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(v.fn(digits.data(), digits.size(), 0), 0xE3069283u);
    EXPECT_EQ(v.fn(zeros.data(), zeros.size(), 0), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
    EXPECT_EQ(v.fn(ones.data(), ones.size(), 0), 0x62A8AB43u);    // 32 bytes of 0xFF
    EXPECT_EQ(v.fn(up.data(), up.size(), 0), 0x46DD794Eu);        // 0x00, 0x01, ... 0x1F
    EXPECT_EQ(v.fn(down.data(), down.size(), 0), 0x113FDB5Cu);    // 0x1F, 0x1E, ... 0x00
    EXPECT_EQ(v.fn(nullptr, 0, 0), 0u);
  }
}

TEST(Crc32c, Sse42EqualsPortableOnEveryLengthAndAlignment) {
  if (!cpu_has_crc32c()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32 instruction";
  const std::vector<uint8_t> buf = random_bytes(kMaxLength + 8, 7);
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n = 0; n <= kMaxLength; ++n) {
      const uint8_t* p = buf.data() + offset;
      ASSERT_EQ(crc32c_sse42(p, n, 0), crc32c_portable(p, n, 0)) << "offset " << offset << ", length " << n;
      // A running checksum passed in as the start value (a message checked in pieces).
      ASSERT_EQ(crc32c_sse42(p, n, 0x12345678u), crc32c_portable(p, n, 0x12345678u))
          << "offset " << offset << ", length " << n;
    }
}

TEST(Crc32c, PiecesEqualOnePass) {
  const std::vector<uint8_t> buf = random_bytes(4096, 11);
  std::mt19937 rng(3);
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    const uint32_t whole = v.fn(buf.data(), buf.size(), 0);
    for (int trial = 0; trial < 50; ++trial) {
      size_t at = 0;
      uint32_t crc = 0;
      while (at < buf.size()) {
        const size_t piece = std::min(buf.size() - at, static_cast<size_t>(rng() % 300));
        crc = v.fn(buf.data() + at, piece, crc);
        at += piece;
      }
      ASSERT_EQ(crc, whole) << "trial " << trial;
    }
  }
}

TEST(Crc32c, EveryOneBitFlipChangesTheChecksum) {
  // A CRC detects every single-bit error: the guarantee the wire check relies on for a flipped bit.
  std::vector<uint8_t> buf = random_bytes(2048, 5);
  const uint32_t sound = crc32c(buf.data(), buf.size());
  for (size_t i = 0; i < buf.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      buf[i] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_NE(crc32c(buf.data(), buf.size()), sound) << "byte " << i << ", bit " << bit;
      buf[i] ^= static_cast<uint8_t>(1u << bit);
    }
}

TEST(Crc32c, DispatchFollowsTheKernelChoice) {
  const Isa before = active_isa();
  set_active_isa(Isa::Ref);
  EXPECT_STREQ(crc32c_variant(), "portable");
  const std::string digits = "123456789";
  EXPECT_EQ(crc32c(digits.data(), digits.size()), 0xE3069283u);
  set_active_isa(supported_isas().back());
  EXPECT_STREQ(crc32c_variant(), cpu_has_crc32c() && supported_isas().back() != Isa::Ref ? "sse4.2" : "portable");
  EXPECT_EQ(crc32c(digits.data(), digits.size()), 0xE3069283u);
  set_active_isa(before);
}

}  // namespace
}  // namespace glacier::kernels
