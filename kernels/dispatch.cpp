// Chooses the kernel variant: cpuid tells what the CPU can run, GLACIER_KERNELS may ask for a
// specific one, and the choice is made once (a function-local static) unless a test overrides it.
#include "kernels/dispatch.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/error.h"

namespace glacier::kernels {

namespace {

// CPUID.1:ECX bit 29, read directly: clang before 16 does not accept "f16c" in __builtin_cpu_supports.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return has;
}

// CPUID.(7,1):EAX bit 4, read directly (not every compiler's __builtin_cpu_supports knows "avxvnni");
// the ymm state it needs is the one cpu_has_avx2 already checked.
bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & bit_AVXVNNI) != 0;
}

bool cpu_has_avx512() {
  // libgcc's cpu model also checks that the OS saves the zmm/opmask state (XCR0).
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool cpu_has_avx512_bf16() {
  static const bool has = cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512bf16");
  return has;
}

constexpr Isa kAllIsas[] = {Isa::Ref, Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512NoVnni, Isa::Avx512NoBf16, Isa::Avx512};

std::string all_names() {
  std::string names;
  for (Isa isa : kAllIsas) names += std::string(names.empty() ? "" : ", ") + isa_name(isa);
  return names;
}

std::string supported_list() {
  std::string names;
  for (Isa isa : supported_isas()) names += std::string(names.empty() ? "" : ", ") + isa_name(isa);
  return names;
}

// -1: no override; otherwise the Isa a test or benchmark asked for.
std::atomic<int> g_override{-1};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Ref: return "ref";
    case Isa::Avx2: return "avx2";
    case Isa::Avx2Vnni: return "avx2-vnni";
    case Isa::Avx512NoVnni: return "avx512-novnni";
    case Isa::Avx512NoBf16: return "avx512-nobf16";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::Ref: return true;
    case Isa::Avx2: return cpu_has_avx2();
    case Isa::Avx2Vnni: return cpu_has_avx2() && cpu_has_avx_vnni();
    case Isa::Avx512NoVnni: return cpu_has_avx512();
    case Isa::Avx512NoBf16: return cpu_has_avx512_vnni();
    case Isa::Avx512: return cpu_has_avx512_bf16();
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas)
    if (cpu_supports(isa)) isas.push_back(isa);
  return isas;
}

const DotKernels& kernels_for(Isa isa) {
  GLACIER_ASSERT(cpu_supports(isa),
                 std::string("kernel variant ") + isa_name(isa) + " is not supported by this CPU");
  switch (isa) {
    case Isa::Ref: return ref_kernels();
    case Isa::Avx2: return avx2_kernels();
    case Isa::Avx2Vnni: return avx2_vnni_kernels();
    case Isa::Avx512NoVnni: return avx512_novnni_kernels();
    case Isa::Avx512NoBf16: return avx512_nobf16_kernels();
    case Isa::Avx512: return avx512_kernels();
  }
  GLACIER_ASSERT(false, "unknown kernel variant");
  return ref_kernels();
}

Isa isa_for_request(const char* request) {
  if (request == nullptr || *request == '\0') return supported_isas().back();
  for (Isa isa : kAllIsas) {
    if (std::strcmp(request, isa_name(isa)) != 0) continue;
    if (!cpu_supports(isa))
      throw InputError(std::string("GLACIER_KERNELS=") + request +
                       ": this CPU cannot run that kernel variant; supported: " + supported_list());
    return isa;
  }
  throw InputError("GLACIER_KERNELS: expected one of " + all_names() + ", found '" + request +
                   "' (supported on this CPU: " + supported_list() + ")");
}

Isa active_isa() {
  const int forced = g_override.load(std::memory_order_acquire);
  if (forced >= 0) return static_cast<Isa>(forced);
  static const Isa chosen = isa_for_request(std::getenv("GLACIER_KERNELS"));
  return chosen;
}

void set_active_isa(Isa isa) {
  GLACIER_ASSERT(cpu_supports(isa),
                 std::string("set_active_isa: ") + isa_name(isa) + " is not supported by this CPU");
  g_override.store(static_cast<int>(isa), std::memory_order_release);
}

const DotKernels& active_kernels() { return kernels_for(active_isa()); }

}  // namespace glacier::kernels
