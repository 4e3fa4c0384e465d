// GGML tensor types as GGUF stores them: ids, block geometry and names. K-quants are listed so the
// reader can name them; which types the engine computes with is the kernels' business.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace glacier::gguf {

enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

struct TypeTraits {
  const char* name;       // "f32", "q8_0", ...
  int64_t block_elems;    // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// Traits of a known type id, or nullopt for an id this build does not know.
std::optional<TypeTraits> type_traits(uint32_t type_id);
std::string type_name(TensorType t);

}  // namespace glacier::gguf
