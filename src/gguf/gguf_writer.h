// Writes GGUF v3 files: metadata, tensor infos and aligned tensor data. Used by glacier_mkmodel and
// by tests that build models and corrupt files; reading back what it wrote gives the same thing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace glacier::gguf {

class Writer {
 public:
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}

  void set(const std::string& key, Value value);  // replaces an existing key, keeps insertion order
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  // Adds a tensor; `bytes` must hold exactly the encoded size of `ne` elements of `type`.
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> bytes);

  // Writes the file; throws InputError naming the path when it cannot.
  void write(const std::string& path) const;
  // The same bytes in memory (tests corrupt them before writing).
  std::vector<uint8_t> serialize() const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace glacier::gguf
