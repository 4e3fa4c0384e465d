// Writes a GGUF v3 file whose tensor data is handed over piece by piece, so a model far larger than
// memory can be written (glacier_mkmodel). Same bytes as gguf::Writer for the same content.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_layout.h"

namespace glacier::gguf {

class StreamWriter : public MetadataBuilder {
 public:
  explicit StreamWriter(uint64_t alignment = 32);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Metadata setters (set, set_u32, ...) come from MetadataBuilder; they must precede open().

  // Declares the next tensor (data comes later, in declaration order); returns its byte size.
  // Throws InputError naming the tensor for a duplicate name, a bad shape or an unknown type.
  uint64_t add_tensor_info(const std::string& name, TensorType type, const std::vector<int64_t>& ne);

  // Creates `path` and writes the header, metadata and tensor infos; throws InputError naming the path.
  void open(const std::string& path);
  // The next bytes of tensor data: they fill the declared tensors in order, and any call may span
  // the end of one tensor and the start of the next (alignment padding is inserted between them).
  void write_data(const void* data, size_t n);
  // Checks that every declared byte arrived, then flushes and closes the file.
  void close();

  uint64_t bytes_written() const { return file_bytes_; }

 private:
  void put(const void* data, size_t n);
  void pad_data_to(uint64_t data_pos);

  TensorTable tensors_;
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t file_bytes_ = 0;
  uint64_t data_pos_ = 0;   // bytes of the data section written (padding included)
  size_t current_ = 0;      // tensor whose bytes come next
};

}  // namespace glacier::gguf
