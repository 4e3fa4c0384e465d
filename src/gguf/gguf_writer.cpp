// Serializes metadata and tensors as a GGUF v3 file (little endian), the inverse of the reader:
// the shared header encoding, then each tensor's bytes at its aligned offset.
#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gguf/gguf_encoding.h"
#include "util/error.h"

namespace glacier::gguf {

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                        std::vector<uint8_t> bytes) {
  // The size is checked before the table takes the tensor, so a refused tensor changes nothing.
  const uint64_t expected = TensorTable::byte_size(name, type, ne);
  if (bytes.size() != expected) {
    throw InputError("tensor '" + name + "': " + type_traits(static_cast<uint32_t>(type))->name + " " +
                     encoding::shape_string(ne) + " needs " + std::to_string(expected) + " bytes, found " +
                     std::to_string(bytes.size()));
  }
  tensors_.add(name, type, ne);
  data_.push_back(std::move(bytes));
}

std::vector<uint8_t> Writer::serialize() const {
  std::vector<uint8_t> out = encode_header(*this, tensors_);
  const size_t data_start = out.size();
  for (size_t i = 0; i < data_.size(); ++i) {
    out.resize(data_start + tensors_.slots()[i].offset, 0);  // zero padding up to the aligned offset
    out.insert(out.end(), data_[i].begin(), data_[i].end());
  }
  return out;
}

void Writer::write(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path + ": cannot create: " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw InputError(path + ": write failed: " + std::strerror(errno));
}

}  // namespace glacier::gguf
