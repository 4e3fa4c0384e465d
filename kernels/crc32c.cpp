// Chooses the CRC32C variant per call: the instruction when the CPU has it, the portable twin when not
// or when GLACIER_KERNELS=ref asks for the reference twins everywhere (so tests can exercise it).
#include "kernels/crc32c.h"

#include "kernels/dispatch.h"

namespace glacier::kernels {

bool cpu_has_crc32c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return has;
}

namespace {
bool use_sse42() { return cpu_has_crc32c() && active_isa() != Isa::Ref; }
}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  return use_sse42() ? crc32c_sse42(data, n, crc) : crc32c_portable(data, n, crc);
}

const char* crc32c_variant() { return use_sse42() ? "sse4.2" : "portable"; }

}  // namespace glacier::kernels
