// CRC32C with the SSE4.2 crc32 instruction. One instruction folds 8 bytes but waits 3 cycles for the
// previous one, so three streams over consecutive blocks run interleaved (about 3x one chain's rate) and
// are joined by shifting a stream's register over the next block's length (a table-driven linear map).
// Compiled with -msse4.2, called only where the CPU has it.
#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "kernels/crc32c.h"

namespace glacier::kernels {
namespace {

// Bytes each of the three streams covers in one round: long enough that joining (8 table reads) is cheap
// next to the 3 x 32 instructions, short enough that a 4 KiB message (one f16 token of a 2048-wide model)
// runs mostly interleaved.
constexpr size_t kBlock = 256;

uint64_t load(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // unaligned loads cost nothing extra on the cores this runs on
  return v;
}

// The CRC register (no pre- or post-inversion) is linear over GF(2) in the register and the data, so
// register(A then B) = shift(register after A) ^ register(B from 0), where shift is the effect of kBlock
// zero bytes: a 32 x 32 bit matrix, applied as four byte-indexed tables.
struct BlockShift {
  std::array<std::array<uint32_t, 256>, 4> table{};
  BlockShift() {
    std::array<uint32_t, 32> column{};
    for (int bit = 0; bit < 32; ++bit) {
      uint64_t r = uint64_t{1} << bit;
      for (size_t i = 0; i < kBlock; i += 8) r = _mm_crc32_u64(r, 0);
      column[static_cast<size_t>(bit)] = static_cast<uint32_t>(r);
    }
    for (size_t k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (b & (1u << bit)) v ^= column[8 * k + static_cast<size_t>(bit)];
        table[k][b] = v;
      }
  }
  uint32_t operator()(uint32_t r) const {
    return table[0][r & 0xFF] ^ table[1][(r >> 8) & 0xFF] ^ table[2][(r >> 16) & 0xFF] ^ table[3][r >> 24];
  }
};

}  // namespace

uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc) {
  static const BlockShift shift;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  for (; n >= 3 * kBlock; n -= 3 * kBlock, p += 3 * kBlock) {
    uint64_t a = c, b = 0, d = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      a = _mm_crc32_u64(a, load(p + i));
      b = _mm_crc32_u64(b, load(p + kBlock + i));
      d = _mm_crc32_u64(d, load(p + 2 * kBlock + i));
    }
    c = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(d);
  }
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, load(p));
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace glacier::kernels
