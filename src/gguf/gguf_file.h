// Reads a GGUF file (v2 and v3): metadata key/values, tensor infos, and tensor data as views into a
// read-only memory map. Every size and offset is checked against the file before use.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gguf/tensor_type.h"

namespace glacier::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;
};

// One metadata value. Integers keep their declared type in `type`; the payload is widened.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the row length (contiguous)
  uint64_t offset = 0;           // relative to the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr; // into the mapping (nullptr for a File written but not mapped)
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and validates `path`; throws glacier::InputError naming the file and the problem.
  static std::unique_ptr<File> open(const std::string& path);
  // Validates GGUF bytes already in memory (fuzzing, corrupted-file tests). The caller keeps `bytes`
  // alive and unchanged while the File lives: tensor data points into them. `name` stands for the
  // path in messages.
  static std::unique_ptr<File> parse(const uint8_t* bytes, uint64_t size, const std::string& name);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section

  // Metadata in file order and by key.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;

  // Typed getters: throw InputError naming the file, the key, the expected and the found type when the
  // key is missing (for the non-optional forms) or has a type that cannot convert without loss.
  std::string get_string(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;
  std::optional<uint64_t> find_uint(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;
  std::vector<int32_t> get_int_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;

  // Advises the kernel to read these bytes ahead (a rank touches only its own shard).
  void prefetch(const TensorInfo& t) const;
  // Drops the mapped pages that lie wholly inside the tensor's data from this process (a copy of it,
  // such as repacked weights, replaces them); they are read back from the file if touched again.
  // Does nothing for bytes given to parse().
  void release(const TensorInfo& t) const;
  // Marks the pages that lie wholly inside the tensor's data as bytes this process does not read: the
  // kernel then neither reads ahead into them nor maps them along with a fault on a neighbouring page
  // (fault-around and large folios stop at the mapping's split). Advice only; nothing for parse()'s bytes.
  void keep_apart(const TensorInfo& t) const;

 private:
  File() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  const uint8_t* map_ = nullptr;
  bool owns_map_ = false;  // true when map_ is our mmap (open), false for the caller's bytes (parse)
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  friend class Parser;
};

}  // namespace glacier::gguf
