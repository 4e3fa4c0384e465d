// Streams a GGUF v3 file: header, metadata and tensor infos are encoded up front (the infos hold
// every tensor's offset, known from the declared shapes), then tensor bytes pass straight to disk.
#include "gguf/gguf_stream_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace glacier::gguf {

namespace {
constexpr size_t kFileBufferBytes = size_t{4} << 20;  // few large writes instead of many small ones
}  // namespace

StreamWriter::StreamWriter(uint64_t alignment) : tensors_(alignment) {}

StreamWriter::~StreamWriter() {
  if (file_) std::fclose(file_);
}

uint64_t StreamWriter::add_tensor_info(const std::string& name, TensorType type, const std::vector<int64_t>& ne) {
  GLACIER_ASSERT(!file_, "GGUF tensor '" + name + "' declared after the header was written");
  return tensors_.add(name, type, ne).n_bytes;
}

void StreamWriter::open(const std::string& path) {
  GLACIER_ASSERT(!file_, "GGUF stream writer opened twice");
  const std::vector<uint8_t> header = encode_header(*this, tensors_);
  freeze();
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw InputError(path + ": cannot create: " + std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, kFileBufferBytes);
  put(header.data(), header.size());
  current_ = 0;
  data_pos_ = 0;
}

void StreamWriter::put(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, file_) != n)
    throw InputError(path_ + ": write failed after " + std::to_string(file_bytes_) + " bytes: " + std::strerror(errno));
  file_bytes_ += n;
}

void StreamWriter::pad_data_to(uint64_t data_pos) {
  static const uint8_t kZeros[256] = {};
  while (data_pos_ < data_pos) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(data_pos - data_pos_, sizeof(kZeros)));
    put(kZeros, n);
    data_pos_ += n;
  }
}

void StreamWriter::write_data(const void* data, size_t n) {
  GLACIER_ASSERT(file_, "GGUF tensor data written before open()");
  const std::vector<TensorSlot>& slots = tensors_.slots();
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    GLACIER_ASSERT(current_ < slots.size(), "more GGUF tensor data than the declared tensors hold");
    const TensorSlot& t = slots[current_];
    pad_data_to(t.offset);
    const uint64_t left = t.offset + t.n_bytes - data_pos_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(left, n));
    put(p, take);
    data_pos_ += take;
    p += take;
    n -= take;
    if (take == left) ++current_;
  }
  // Zero-byte tensors have nothing to wait for.
  while (current_ < slots.size() && slots[current_].n_bytes == 0 && data_pos_ >= slots[current_].offset)
    ++current_;
}

void StreamWriter::close() {
  GLACIER_ASSERT(file_, "GGUF stream writer closed before open()");
  const std::vector<TensorSlot>& slots = tensors_.slots();
  while (current_ < slots.size() && slots[current_].n_bytes == 0) {
    pad_data_to(slots[current_].offset);
    ++current_;
  }
  GLACIER_ASSERT(current_ == slots.size(),
                 "GGUF tensor '" + (current_ < slots.size() ? slots[current_].name : std::string()) +
                     "' did not receive all its bytes");
  std::FILE* f = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  const int saved_errno = errno;
  if (std::fclose(f) != 0 || !flushed)
    throw InputError(path_ + ": write failed at close: " + std::strerror(flushed ? errno : saved_errno));
}

}  // namespace glacier::gguf
