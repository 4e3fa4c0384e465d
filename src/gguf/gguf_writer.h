// Writes GGUF v3 files: metadata, tensor infos and aligned tensor data. Used by glacier_mkmodel and
// by tests that build models and corrupt files; reading back what it wrote gives the same thing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_layout.h"

namespace glacier::gguf {

// Metadata setters (set, set_u32, ...) come from MetadataBuilder.
class Writer : public MetadataBuilder {
 public:
  explicit Writer(uint64_t alignment = 32) : tensors_(alignment) {}

  // Adds a tensor; `bytes` must hold exactly the encoded size of `ne` elements of `type`.
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> bytes);

  // Writes the file; throws InputError naming the path when it cannot.
  void write(const std::string& path) const;
  // The same bytes in memory (tests corrupt them before writing).
  std::vector<uint8_t> serialize() const;

 private:
  TensorTable tensors_;
  std::vector<std::vector<uint8_t>> data_;  // one entry per slot of tensors_
};

}  // namespace glacier::gguf
