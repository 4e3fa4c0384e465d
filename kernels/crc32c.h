// CRC32C (Castagnoli; iSCSI's and ext4's checksum) of byte buffers: the checksum every pipeline message
// carries. A portable slice-by-8 twin always compiled, the SSE4.2 crc32 instruction chosen at run time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::kernels {

// Reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF (RFC 3720, B.4). `crc` is a
// previous call's result (0 to start), so crc32c(b, crc32c(a)) equals the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The variants: the portable one is the reference; the SSE4.2 one only where cpu_has_crc32c().
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);
uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc = 0);
bool cpu_has_crc32c();
// The variant crc32c() uses: "sse4.2", or "portable" without the instruction or under GLACIER_KERNELS=ref.
const char* crc32c_variant();

}  // namespace glacier::kernels
