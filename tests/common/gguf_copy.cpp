// Test helper for edited copies of a GGUF file: its keys and tensors into a Writer.
#include "common/gguf_copy.h"

#include <cstdint>
#include <vector>

namespace glacier::testing {

void copy_keys(const gguf::File& from, gguf::Writer& to, const std::string& except) {
  for (const auto& [key, value] : from.metadata())
    if (key != except) to.set(key, value);
}

void copy_tensors(const gguf::File& from, gguf::Writer& to, const std::string& except) {
  for (const gguf::TensorInfo& t : from.tensors()) {
    if (t.name == except) continue;
    to.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                  std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
}

}  // namespace glacier::testing
