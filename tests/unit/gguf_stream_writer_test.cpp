// GGUF stream writer: the same bytes as gguf::Writer for the same content (default and custom
// alignment, data handed over in pieces that span tensors), and refusal of bad tensor declarations.
#include "gguf/gguf_stream_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace glacier::gguf {
namespace {

using glacier::testing::expect_input_error;

struct Content {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

std::vector<Content> sample_tensors() {
  auto bytes = [](size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 7 * i);
    return b;
  };
  return {
      {"a", TensorType::F32, {3}, bytes(12, 1)},         // 12 bytes: the next tensor needs padding
      {"b", TensorType::Q8_0, {64, 2}, bytes(136, 2)},   // 4 blocks of 34 bytes
      {"empty", TensorType::F32, {0}, {}},
      {"c", TensorType::F16, {5, 1}, bytes(10, 3)},
  };
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The same keys on either writer (StreamWriter and Writer share the setters), one of them set twice.
template <class AnyWriter>
void set_sample_keys(AnyWriter& w) {
  w.set_u32("n", 5);
  w.set_string("s", "text");
  w.set_f32_array("f", {1.5f, -2.0f});
  w.set_string_array("t", {"x", "yz"});
  w.set_i32_array("i", {-1, 2});
  w.set_bool("b", true);
  w.set_u64("u", uint64_t{1} << 40);
  w.set_u32("n", 6);  // replaces in place
}

std::vector<uint8_t> stream_bytes(uint64_t alignment, size_t piece, const std::string& path) {
  StreamWriter w(alignment);
  set_sample_keys(w);
  std::vector<uint8_t> all;
  for (const Content& t : sample_tensors()) {
    EXPECT_EQ(w.add_tensor_info(t.name, t.type, t.ne), t.bytes.size());
    all.insert(all.end(), t.bytes.begin(), t.bytes.end());
  }
  w.open(path);
  for (size_t at = 0; at < all.size(); at += piece) w.write_data(all.data() + at, std::min(piece, all.size() - at));
  w.close();
  const std::vector<uint8_t> bytes = read_file(path);
  EXPECT_EQ(bytes.size(), w.bytes_written());
  return bytes;
}

std::vector<uint8_t> writer_bytes(uint64_t alignment) {
  Writer w(alignment);
  set_sample_keys(w);
  for (const Content& t : sample_tensors()) w.add_tensor(t.name, t.type, t.ne, t.bytes);
  return w.serialize();
}

TEST(GgufStreamWriter, SameBytesAsTheInMemoryWriter) {
  const std::string dir = testing::scratch_dir("gguf_stream_writer_same");
  for (uint64_t alignment : {32u, 64u, 8u}) {
    for (size_t piece : {1u, 5u, 158u, 4096u}) {
      EXPECT_EQ(stream_bytes(alignment, piece, dir + "/m.gguf"), writer_bytes(alignment))
          << "alignment " << alignment << ", pieces of " << piece;
    }
  }
}

TEST(GgufStreamWriter, FileReadsBackWithItsTensors) {
  const std::string path = testing::scratch_dir("gguf_stream_writer_read") + "/m.gguf";
  stream_bytes(32, 7, path);
  const auto f = File::open(path);
  EXPECT_EQ(f->get_uint("n"), 6u);
  EXPECT_EQ(f->get_string("s"), "text");
  for (const Content& t : sample_tensors()) {
    const TensorInfo* info = f->find_tensor(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    ASSERT_EQ(info->n_bytes, t.bytes.size());
    if (!t.bytes.empty()) {
      EXPECT_EQ(0, std::memcmp(info->data, t.bytes.data(), t.bytes.size())) << t.name;
    }
  }
}

TEST(GgufStreamWriter, RefusesBadDeclarationsNamingTheTensor) {
  StreamWriter w;
  w.add_tensor_info("x", TensorType::F32, {4});
  expect_input_error([&] { w.add_tensor_info("x", TensorType::F32, {4}); }, {"'x': declared twice"});
  expect_input_error([&] { w.add_tensor_info("q", TensorType::Q8_0, {48}); }, {"row length 48"});
  expect_input_error([&] { w.add_tensor_info("d", TensorType::F32, {1, 1, 1, 1, 1}); }, {"1..4 dimensions"});
}

TEST(GgufStreamWriter, MissingDataIsAnInternalError) {
  const std::string path = testing::scratch_dir("gguf_stream_writer_short") + "/m.gguf";
  StreamWriter w;
  w.add_tensor_info("x", TensorType::F32, {4});
  w.open(path);
  const float three[3] = {1, 2, 3};
  w.write_data(three, sizeof(three));
  EXPECT_THROW(w.close(), InternalError);
}

TEST(GgufStreamWriter, UncreatableFileNamesThePath) {
  StreamWriter w;
  expect_input_error([&] { w.open("/nonexistent-dir/m.gguf"); }, {"/nonexistent-dir/m.gguf: cannot create"});
}

}  // namespace
}  // namespace glacier::gguf
