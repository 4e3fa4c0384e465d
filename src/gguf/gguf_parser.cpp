// Opens a GGUF file: maps it read-only and parses the header, metadata and tensor infos, checking
// every count, size and offset against the file before it is used (the file is untrusted input).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace glacier::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader decodes little-endian fields with plain loads");

namespace {

constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, kv count
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;  // arrays of arrays nest this deep at most (real files use 1)
constexpr int kMaxDims = 4;
// Smallest possible encodings, used to refuse counts the remaining bytes cannot hold before any
// allocation: a key/value is a key length, a type and at least one value byte; a tensor info is a
// name length, n_dims, one dim, a type and an offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

// Encoded size of one scalar of type `t`, or 0 for the variable-length types (string, array).
uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return 0;
  }
  return 0;
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::FLOAT64); }

}  // namespace

// Walks the mapped bytes with a cursor; `where_` names the item being read so that every error
// says which key or tensor was bad.
class Parser {
 public:
  explicit Parser(File& f) : f_(f), base_(f.map_), size_(f.size_) {}

  void parse() {
    parse_header();
    parse_metadata();
    parse_alignment();
    parse_tensor_infos();
    place_tensor_data();
  }

 private:
  File& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string where_ = "header";
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(f_.path_ + ": " + where_ + ": " + what);
  }

  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string(what) + " at offset " + std::to_string(pos_) + " needs " + std::to_string(n) +
           (n == 1 ? " byte" : " bytes") + ", which runs past the end of the file (" + std::to_string(size_) +
           " bytes)");
    }
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(std::string(what) + ": string length " + std::to_string(len) + " at offset " +
           std::to_string(pos_ - 8) + " runs past the end of the file (" + std::to_string(size_) + " bytes)");
    }
    // Strings are kept as raw bytes: GGUF says UTF-8, but a bad byte is not worth refusing a model.
    std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }

  void parse_header() {
    if (size_ < 4) fail("file is " + std::to_string(size_) + " bytes, too short to hold the GGUF magic");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
      fail("bad magic: expected 'GGUF' (47 47 55 46), found bytes " + hex_bytes(base_, 4) +
           "; this is not a GGUF file");
    }
    pos_ = 4;
    uint32_t version = read<uint32_t>("version");
    if (version != 2 && version != 3) {
      if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3) {
        fail("version field reads " + std::to_string(version) +
             ": this is a big-endian GGUF file, only little-endian files are supported");
      }
      fail("unsupported version " + std::to_string(version) + ", expected 2 or 3");
    }
    f_.version_ = version;
    n_tensors_ = read<uint64_t>("tensor count");
    n_kv_ = read<uint64_t>("metadata key/value count");
    if (n_kv_ > remaining() / kMinKvBytes) {
      fail("metadata key/value count " + std::to_string(n_kv_) + " is impossible for a file of " +
           std::to_string(size_) + " bytes: truncated or corrupt");
    }
    if (n_tensors_ > remaining() / kMinTensorInfoBytes) {
      fail("tensor count " + std::to_string(n_tensors_) + " is impossible for a file of " +
           std::to_string(size_) + " bytes: truncated or corrupt");
    }
  }

  ValueType read_value_type(const char* what) {
    uint64_t at = pos_;
    uint32_t raw = read<uint32_t>(what);
    if (!is_known_value_type(raw)) {
      fail(std::string("unknown ") + what + " " + std::to_string(raw) + " at offset " + std::to_string(at) +
           " (known: 0.." + std::to_string(static_cast<uint32_t>(ValueType::FLOAT64)) + ")");
    }
    return static_cast<ValueType>(raw);
  }

  Value read_value(ValueType t, int depth) {
    Value v;
    v.type = t;
    switch (t) {
      case ValueType::UINT8:
        v.data = uint64_t{read<uint8_t>("uint8 value")};
        break;
      case ValueType::INT8:
        v.data = int64_t{read<int8_t>("int8 value")};
        break;
      case ValueType::UINT16:
        v.data = uint64_t{read<uint16_t>("uint16 value")};
        break;
      case ValueType::INT16:
        v.data = int64_t{read<int16_t>("int16 value")};
        break;
      case ValueType::UINT32:
        v.data = uint64_t{read<uint32_t>("uint32 value")};
        break;
      case ValueType::INT32:
        v.data = int64_t{read<int32_t>("int32 value")};
        break;
      case ValueType::UINT64:
        v.data = read<uint64_t>("uint64 value");
        break;
      case ValueType::INT64:
        v.data = read<int64_t>("int64 value");
        break;
      case ValueType::FLOAT32:
        v.data = double{read<float>("float32 value")};
        break;
      case ValueType::FLOAT64:
        v.data = read<double>("float64 value");
        break;
      case ValueType::BOOL: {
        uint8_t b = read<uint8_t>("bool value");
        if (b > 1)
          fail("bool value at offset " + std::to_string(pos_ - 1) + " is " + std::to_string(b) +
               ", expected 0 or 1");
        v.data = b == 1;
        break;
      }
      case ValueType::STRING:
        v.data = read_string("string value");
        break;
      case ValueType::ARRAY:
        v.data = read_array(depth + 1);
        break;
    }
    return v;
  }

  Array read_array(int depth) {
    if (depth > kMaxArrayDepth) {
      fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels at offset " +
           std::to_string(pos_));
    }
    Array a;
    a.elem_type = read_value_type("array element type");
    uint64_t count_at = pos_;
    uint64_t count = read<uint64_t>("array count");
    // Strings need at least their 8-byte length, arrays their type and count.
    uint64_t min_elem = scalar_size(a.elem_type);
    if (a.elem_type == ValueType::STRING) min_elem = 8;
    if (a.elem_type == ValueType::ARRAY) min_elem = 4 + 8;
    if (count > remaining() / min_elem) {
      fail("array count " + std::to_string(count) + " of " + value_type_name(a.elem_type) + " at offset " +
           std::to_string(count_at) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes left in the file");
    }
    a.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) a.items.push_back(read_value(a.elem_type, depth));
    return a;
  }

  void parse_metadata() {
    f_.kv_.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) {
      where_ = "key #" + std::to_string(i);
      std::string key = read_string("key name");
      where_ = "key '" + key + "'";
      if (f_.kv_index_.count(key))
        fail("duplicate key (first defined as key #" + std::to_string(f_.kv_index_[key]) + ")");
      ValueType t = read_value_type("value type");
      Value v = read_value(t, 0);
      f_.kv_index_.emplace(key, f_.kv_.size());
      f_.kv_.emplace_back(std::move(key), std::move(v));
    }
  }

  void parse_alignment() {
    where_ = "key 'general.alignment'";
    f_.alignment_ = kDefaultAlignment;
    const Value* v = f_.find("general.alignment");
    if (!v) return;
    if (v->type != ValueType::UINT32) {
      fail(std::string("expected uint32, found ") + value_type_name(v->type));
    }
    uint64_t a = std::get<uint64_t>(v->data);
    if (a == 0 || !std::has_single_bit(a)) {
      fail("alignment " + std::to_string(a) + " is not a non-zero power of two");
    }
    f_.alignment_ = a;
  }

  void parse_tensor_infos() {
    f_.tensors_.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      where_ = "tensor #" + std::to_string(i);
      TensorInfo t;
      t.name = read_string("tensor name");
      where_ = "tensor '" + t.name + "'";
      if (f_.tensor_index_.count(t.name)) {
        fail("duplicate tensor name (first defined as tensor #" + std::to_string(f_.tensor_index_[t.name]) +
             ")");
      }
      uint32_t n_dims = read<uint32_t>("n_dims");
      if (n_dims == 0 || n_dims > kMaxDims) {
        fail("n_dims is " + std::to_string(n_dims) + ", expected 1.." + std::to_string(kMaxDims));
      }
      t.n_dims = static_cast<int>(n_dims);
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t ne = read<uint64_t>("dimension");
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail("ne[" + std::to_string(d) + "] = " + std::to_string(static_cast<int64_t>(ne)) +
               " is negative");
        }
        t.ne[d] = static_cast<int64_t>(ne);
      }
      uint32_t type_id = read<uint32_t>("tensor type");
      auto traits = type_traits(type_id);
      if (!traits) fail("unknown tensor type id " + std::to_string(type_id));
      t.type = static_cast<TensorType>(type_id);
      t.offset = read<uint64_t>("tensor data offset");
      t.n_bytes = byte_size(t, *traits);
      f_.tensor_index_.emplace(t.name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(t));
    }
  }

  // Bytes of `t`'s data: whole blocks per row times the number of rows, overflow-checked.
  uint64_t byte_size(const TensorInfo& t, const TypeTraits& traits) const {
    int64_t n = 1;
    for (int d = 0; d < kMaxDims; ++d) {
      if (__builtin_mul_overflow(n, t.ne[d], &n))
        fail("element count of shape " + shape(t) + " overflows int64");
    }
    if (t.ne[0] % traits.block_elems != 0) {
      fail("row length ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " + traits.name +
           " block size " + std::to_string(traits.block_elems));
    }
    uint64_t blocks = static_cast<uint64_t>(n / traits.block_elems);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(traits.block_bytes), &bytes)) {
      fail("byte size of " + std::string(traits.name) + " shape " + shape(t) + " overflows 64 bits");
    }
    return bytes;
  }

  static std::string shape(const TensorInfo& t) {
    std::string s = "[";
    for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
  }

  void place_tensor_data() {
    uint64_t header_end = pos_;
    uint64_t a = f_.alignment_;
    where_ = "data section";
    uint64_t padded = 0;
    if (__builtin_add_overflow(header_end, a - 1, &padded)) fail("data section offset overflows");
    f_.data_offset_ = padded / a * a;
    for (TensorInfo& t : f_.tensors_) {
      where_ = "tensor '" + t.name + "'";
      if (t.offset % a != 0) {
        fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(a));
      }
      uint64_t start = 0, end = 0;
      if (__builtin_add_overflow(f_.data_offset_, t.offset, &start) ||
          __builtin_add_overflow(start, t.n_bytes, &end) || end > size_) {
        fail("data [offset " + std::to_string(f_.data_offset_) + " + " + std::to_string(t.offset) + ", " +
             std::to_string(t.n_bytes) + " bytes] ends past the end of the file (" + std::to_string(size_) +
             " bytes)");
      }
      t.data = base_ + start;
    }
    check_no_overlap();
  }

  // Writers lay tensors out one after another; two tensors sharing bytes mean a corrupt offset, and
  // computing with them would give garbage rather than an error.
  void check_no_overlap() {
    std::vector<const TensorInfo*> by_start;
    for (const TensorInfo& t : f_.tensors_)
      if (t.n_bytes > 0) by_start.push_back(&t);
    // Stable: of two tensors with one start, the later in the file is the one named as corrupt.
    std::stable_sort(by_start.begin(), by_start.end(),
                     [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
    for (size_t i = 1; i < by_start.size(); ++i) {
      const TensorInfo& prev = *by_start[i - 1];
      const TensorInfo& t = *by_start[i];
      if (t.data >= prev.data + prev.n_bytes) continue;
      where_ = "tensor '" + t.name + "'";
      fail("data " + file_range(t) + " overlaps the data of tensor '" + prev.name + "' " + file_range(prev) +
           ": corrupt tensor data offset");
    }
  }

  // "[start, end)" of a tensor's data as file offsets.
  std::string file_range(const TensorInfo& t) const {
    const uint64_t start = static_cast<uint64_t>(t.data - base_);
    std::string s = "[";  // built with += (GCC 12 warns falsely on "[" + std::to_string(...))
    s += std::to_string(start);
    s += ", ";
    s += std::to_string(start + t.n_bytes);
    return s + ")";
  }
};

namespace {

// Checked before mapping, as mmap refuses an empty file with a less helpful message.
[[noreturn]] void fail_shorter_than_header(const std::string& path, uint64_t size) {
  throw InputError(path + ": header: file is " + std::to_string(size) + " bytes, too short for a GGUF header (" +
                   std::to_string(kHeaderBytes) + " bytes): truncated or not a GGUF file");
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw InputError(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ < kHeaderBytes) {
    ::close(fd);
    fail_shorter_than_header(path, f->size_);
  }
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (m == MAP_FAILED) throw InputError(path + ": cannot map: " + std::strerror(map_err));
  f->map_ = static_cast<const uint8_t*>(m);
  f->owns_map_ = true;
  Parser(*f).parse();
  return f;
}

std::unique_ptr<File> File::parse(const uint8_t* bytes, uint64_t size, const std::string& name) {
  if (size < kHeaderBytes) fail_shorter_than_header(name, size);
  std::unique_ptr<File> f(new File());
  f->path_ = name;
  f->size_ = size;
  f->map_ = bytes;
  Parser(*f).parse();
  return f;
}

File::~File() {
  if (map_ && owns_map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

}  // namespace glacier::gguf
