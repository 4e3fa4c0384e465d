// Portable CRC32C, slice-by-8: eight 256-entry tables (built at compile time from the polynomial) fold
// eight message bytes a step, about 1 byte a cycle; the reference the SSE4.2 variant is tested against.
#include <array>
#include <bit>
#include <cstring>

#include "kernels/crc32c.h"

namespace glacier::kernels {
namespace {

static_assert(std::endian::native == std::endian::little, "the 8-byte step reads the message little-endian");

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reflected

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// table[0][b]: the CRC register after shifting byte b through it; table[k][b]: the same byte followed by
// k zero bytes, so one step can fold the eight bytes of a word independently.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= c;
    c = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^ kTables[5][(word >> 16) & 0xFF] ^
        kTables[4][(word >> 24) & 0xFF] ^ kTables[3][(word >> 32) & 0xFF] ^ kTables[2][(word >> 40) & 0xFF] ^
        kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

}  // namespace glacier::kernels
