// Streams a GGUF v3 file: header, metadata and tensor infos are encoded up front (the infos hold
// every tensor's offset, known from the declared shapes), then tensor bytes pass straight to disk.
#include "gguf/gguf_stream_writer.h"

#include "gguf/gguf_encoding.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace glacier::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF stream writer stores little-endian fields with plain copies");

using namespace encoding;

namespace {
constexpr size_t kFileBufferBytes = size_t{4} << 20;  // few large writes instead of many small ones
}  // namespace

StreamWriter::StreamWriter(uint64_t alignment) : alignment_(alignment) {
  GLACIER_ASSERT(alignment_ != 0 && std::has_single_bit(alignment_) && alignment_ <= UINT32_MAX,
                 "GGUF alignment " + std::to_string(alignment_) + " is not a power of two");
}

StreamWriter::~StreamWriter() {
  if (file_) std::fclose(file_);
}

void StreamWriter::set(const std::string& key, Value value) {
  GLACIER_ASSERT(!file_, "GGUF metadata set after the header was written");
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void StreamWriter::set_u32(const std::string& key, uint32_t v) { set(key, make_value(ValueType::UINT32, uint64_t{v})); }
void StreamWriter::set_u64(const std::string& key, uint64_t v) { set(key, make_value(ValueType::UINT64, v)); }
void StreamWriter::set_f32(const std::string& key, float v) { set(key, make_value(ValueType::FLOAT32, double{v})); }
void StreamWriter::set_bool(const std::string& key, bool v) { set(key, make_value(ValueType::BOOL, v)); }
void StreamWriter::set_string(const std::string& key, const std::string& v) {
  set(key, make_value(ValueType::STRING, v));
}
void StreamWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, make_array<std::string>(ValueType::STRING, v));
}
void StreamWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, make_array<double>(ValueType::FLOAT32, v));
}
void StreamWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, make_array<int64_t>(ValueType::INT32, v));
}

uint64_t StreamWriter::add_tensor_info(const std::string& name, TensorType type, const std::vector<int64_t>& ne) {
  GLACIER_ASSERT(!file_, "GGUF tensor declared after the header was written");
  const std::string what = "tensor '" + name + "'";
  for (const TensorInfoOut& t : tensors_)
    if (t.name == name) throw InputError(what + ": declared twice");
  const auto traits = type_traits(static_cast<uint32_t>(type));
  if (!traits) throw InputError(what + ": unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > 4)
    throw InputError(what + ": expected 1..4 dimensions, found " + std::to_string(ne.size()));
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d < 0) throw InputError(what + ": negative dimension in shape " + shape_string(ne));
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(what + ": element count of " + shape_string(ne) + " overflows int64");
  }
  if (ne[0] % traits->block_elems != 0)
    throw InputError(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " + traits->name +
                     " block size " + std::to_string(traits->block_elems));
  uint64_t n_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / traits->block_elems),
                             static_cast<uint64_t>(traits->block_bytes), &n_bytes))
    throw InputError(what + ": byte size of " + shape_string(ne) + " overflows 64 bits");
  const uint64_t offset = round_up(data_size_, alignment_);
  tensors_.push_back(TensorInfoOut{name, type, ne, n_bytes, offset});
  data_size_ = offset + n_bytes;
  return n_bytes;
}

void StreamWriter::open(const std::string& path) {
  GLACIER_ASSERT(!file_, "GGUF stream writer opened twice");
  // As in gguf::Writer: the alignment key only when the reader cannot assume the default, unless
  // the caller set it explicitly.
  bool add_alignment_key = alignment_ != kDefaultAlignment;
  for (const auto& kv : kv_) add_alignment_key = add_alignment_key && kv.first != kAlignmentKey;

  ByteSink h;
  h.put_raw("GGUF", 4);
  h.put<uint32_t>(kVersion);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(kv_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    h.put_string(kAlignmentKey);
    h.put(static_cast<uint32_t>(ValueType::UINT32));
    h.put(static_cast<uint32_t>(alignment_));
  }
  for (const auto& [key, value] : kv_) {
    h.put_string(key);
    h.put(static_cast<uint32_t>(value.type));
    h.put_value(value);
  }
  for (const TensorInfoOut& t : tensors_) {
    h.put_string(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) h.put<uint64_t>(static_cast<uint64_t>(d));
    h.put(static_cast<uint32_t>(t.type));
    h.put<uint64_t>(t.offset);
  }
  h.bytes.resize(round_up(h.bytes.size(), alignment_), 0);

  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw InputError(path + ": cannot create: " + std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, kFileBufferBytes);
  put(h.bytes.data(), h.bytes.size());
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
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    GLACIER_ASSERT(current_ < tensors_.size(), "more GGUF tensor data than the declared tensors hold");
    const TensorInfoOut& t = tensors_[current_];
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
  while (current_ < tensors_.size() && tensors_[current_].n_bytes == 0 && data_pos_ >= tensors_[current_].offset)
    ++current_;
}

void StreamWriter::close() {
  GLACIER_ASSERT(file_, "GGUF stream writer closed before open()");
  while (current_ < tensors_.size() && tensors_[current_].n_bytes == 0) {
    pad_data_to(tensors_[current_].offset);
    ++current_;
  }
  GLACIER_ASSERT(current_ == tensors_.size(),
                 "GGUF tensor '" + (current_ < tensors_.size() ? tensors_[current_].name : std::string()) +
                     "' did not receive all its bytes");
  std::FILE* f = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  const int saved_errno = errno;
  if (std::fclose(f) != 0 || !flushed)
    throw InputError(path_ + ": write failed at close: " + std::strerror(flushed ? errno : saved_errno));
}

}  // namespace glacier::gguf
