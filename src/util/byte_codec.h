// Little-endian byte encoding of plain values, strings and vectors: the one writer and bounds-checked
// reader behind GGUF headers and the replicas' result messages.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace glacier::util {

static_assert(std::endian::native == std::endian::little,
              "byte encodings store little-endian fields with plain copies");

// Appends to a growing buffer. Strings and vectors are a uint64 count followed by their bytes.
class ByteWriter {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put_bytes(&v, sizeof(T));
  }
  // resize + memcpy rather than insert: GCC 12 warns falsely about inserting a few bytes.
  void put_bytes(const void* data, size_t n) {
    if (n == 0) return;  // an empty source's pointer may be null, which memcpy must not see
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, data, n);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  // Zero bytes up to the next multiple of `alignment`.
  void pad_to(uint64_t alignment) { bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, 0); }

  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what ByteWriter wrote; a read past the end throws std::runtime_error starting with `what`
// (the message's name), so a short or corrupt message is an error, never a wild read.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string what) : p_(data), left_(size), what_(std::move(what)) {}

  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    const uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  template <typename T>
  std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    const uint64_t n = get<uint64_t>();
    if (n > left_ / sizeof(T)) throw std::runtime_error(what_ + ": vector longer than the message");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* take(uint64_t n) {
    if (n > left_) throw std::runtime_error(what_ + ": truncated");
    const uint8_t* p = p_;
    p_ += n;
    left_ -= n;
    return p;
  }
  const uint8_t* p_;
  size_t left_;
  std::string what_;
};

}  // namespace glacier::util
