// GGUF writer: exact bytes of a small file (checked against a hand-encoded copy of the spec's
// layout), key order and replacement, the alignment key, and refusal of inconsistent tensors.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "util/error.h"

namespace glacier::gguf {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void append(Bytes& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}

void append_string(Bytes& b, const std::string& s) {
  append<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

Bytes floats(std::initializer_list<float> v) {
  Bytes b;
  for (float x : v) append(b, x);
  return b;
}

using glacier::testing::expect_input_error;
using glacier::testing::input_error_message;

TEST(GgufWriter, SerializesTheSpecLayoutByteForByte) {
  Writer w;
  w.set_u32("a", 7);
  w.set_string("s", "hi");
  w.add_tensor("t", TensorType::F32, {2}, floats({1.0f, 2.0f}));
  w.add_tensor("u", TensorType::F32, {1}, floats({3.0f}));

  Bytes want = {'G', 'G', 'U', 'F'};
  append<uint32_t>(want, 3);  // version
  append<uint64_t>(want, 2);  // tensors
  append<uint64_t>(want, 2);  // key/values
  append_string(want, "a");
  append<uint32_t>(want, 4);  // UINT32
  append<uint32_t>(want, 7);
  append_string(want, "s");
  append<uint32_t>(want, 8);  // STRING
  append_string(want, "hi");
  append_string(want, "t");
  append<uint32_t>(want, 1);  // n_dims
  append<uint64_t>(want, 2);
  append<uint32_t>(want, 0);  // F32
  append<uint64_t>(want, 0);  // offset
  append_string(want, "u");
  append<uint32_t>(want, 1);
  append<uint64_t>(want, 1);
  append<uint32_t>(want, 0);
  append<uint64_t>(want, 32);  // 8 bytes of "t" rounded up to the 32-byte alignment
  want.resize((want.size() + 31) / 32 * 32, 0);
  Bytes t = floats({1.0f, 2.0f}), u = floats({3.0f});
  want.insert(want.end(), t.begin(), t.end());
  want.resize(want.size() + 24, 0);
  want.insert(want.end(), u.begin(), u.end());

  EXPECT_EQ(w.serialize(), want);
}

TEST(GgufWriter, KeepsInsertionOrderAndReplacesInPlace) {
  Writer w;
  w.set_u32("first", 1);
  w.set_string("second", "x");
  w.set_bool("third", true);
  w.set_f32("second", 2.5f);  // replaces, keeps position 1
  std::string path = glacier::testing::scratch_dir("gguf_writer_order") + "/o.gguf";
  w.write(path);
  auto f = File::open(path);
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->metadata()[0].first, "first");
  EXPECT_EQ(f->metadata()[1].first, "second");
  EXPECT_EQ(f->metadata()[2].first, "third");
  EXPECT_EQ(f->metadata()[1].second.type, ValueType::FLOAT32);
  EXPECT_EQ(f->get_float("second"), 2.5);
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufWriter, TypedSettersStoreTheirTypes) {
  Writer w;
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -5);
  w.set_u64("u64", uint64_t{1} << 40);
  w.set_f32("f32", -0.5f);
  w.set_bool("b", false);
  w.set_string("s", "str");
  w.set_string_array("sa", {"x", "yz"});
  w.set_f32_array("fa", {0.25f});
  w.set_i32_array("ia", {-7, 9});
  std::string path = glacier::testing::scratch_dir("gguf_writer_types") + "/t.gguf";
  w.write(path);
  auto f = File::open(path);
  const std::pair<const char*, ValueType> types[] = {
      {"u32", ValueType::UINT32},  {"i32", ValueType::INT32}, {"u64", ValueType::UINT64},
      {"f32", ValueType::FLOAT32}, {"b", ValueType::BOOL},    {"s", ValueType::STRING},
      {"sa", ValueType::ARRAY},    {"fa", ValueType::ARRAY},  {"ia", ValueType::ARRAY}};
  for (const auto& [key, type] : types) {
    ASSERT_NE(f->find(key), nullptr) << key;
    EXPECT_EQ(f->find(key)->type, type) << key;
  }
  EXPECT_EQ(f->get_uint("u32"), 4000000000u);
  EXPECT_EQ(f->get_int("i32"), -5);
  EXPECT_EQ(f->get_uint("u64"), uint64_t{1} << 40);
  EXPECT_EQ(f->get_float("f32"), -0.5);
  EXPECT_FALSE(f->get_bool("b"));
  EXPECT_EQ(f->get_string("s"), "str");
  EXPECT_EQ(f->get_string_array("sa"), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(f->get_float_array("fa"), (std::vector<float>{0.25f}));
  EXPECT_EQ(f->get_int_array("ia"), (std::vector<int32_t>{-7, 9}));
  EXPECT_EQ(std::get<Array>(f->find("ia")->data).elem_type, ValueType::INT32);
}

TEST(GgufWriter, WritesAlignmentKeyOnlyWhenNotDefault) {
  for (uint64_t alignment : {uint64_t{32}, uint64_t{64}, uint64_t{4096}}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    Writer w(alignment);
    w.set_u32("k", 1);
    w.add_tensor("a", TensorType::F32, {3}, floats({1, 2, 3}));
    w.add_tensor("b", TensorType::F16, {2}, Bytes(4, 9));
    Bytes bytes = w.serialize();
    std::string path = glacier::testing::scratch_dir("gguf_writer_align") + "/a.gguf";
    w.write(path);
    auto f = File::open(path);
    EXPECT_EQ(f->alignment(), alignment);
    if (alignment == 32) {
      EXPECT_EQ(f->find("general.alignment"), nullptr);
      EXPECT_EQ(f->metadata().size(), 1u);
    } else {
      EXPECT_EQ(f->get_uint("general.alignment"), alignment);
      EXPECT_EQ(f->find("general.alignment")->type, ValueType::UINT32);
    }
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->tensors()[1].offset, alignment);  // "a" holds 12 bytes, "b" starts at the next boundary
    EXPECT_EQ(f->file_size(), bytes.size());
    EXPECT_EQ(f->tensors()[1].data[0], 9);
  }
}

TEST(GgufWriter, RefusesTensorsThatDoNotMatchTheirType) {
  Writer w;
  expect_input_error([&] { w.add_tensor("w.q8", TensorType::Q8_0, {64, 2}, Bytes(100)); },
                     {"'w.q8'", "q8_0", "[64, 2]", "136", "100"});
  expect_input_error([&] { w.add_tensor("w.row", TensorType::Q4_K, {128}, Bytes(72)); }, {"block size 256"});
  expect_input_error([&] { w.add_tensor("w.0d", TensorType::F32, {}, Bytes()); }, {"found 0"});
  expect_input_error([&] { w.add_tensor("w.5d", TensorType::F32, {1, 1, 1, 1, 1}, Bytes(4)); }, {"found 5"});
  expect_input_error([&] { w.add_tensor("w.neg", TensorType::F32, {2, -1}, Bytes()); }, {"negative"});
  expect_input_error([&] { w.add_tensor("w.bad", static_cast<TensorType>(4), {32}, Bytes(18)); },
                     {"unknown tensor type id 4"});
  w.add_tensor("w.ok", TensorType::F32, {1}, Bytes(4));
  expect_input_error([&] { w.add_tensor("w.ok", TensorType::F32, {1}, Bytes(4)); }, {"'w.ok'"});
}

TEST(GgufWriter, WriteToAnUnwritablePathNamesIt) {
  Writer w;
  const std::string path = "/nonexistent-dir/out.gguf";
  const std::string msg = input_error_message([&] { w.write(path); });
  EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
}

TEST(GgufWriter, ValueOutOfRangeForItsDeclaredTypeIsABug) {
  Writer w;
  Value v;
  v.type = ValueType::UINT8;
  v.data = uint64_t{300};
  w.set("bad", v);
  EXPECT_THROW(w.serialize(), InternalError);
  Value mismatched;
  mismatched.type = ValueType::STRING;
  mismatched.data = int64_t{1};
  Writer w2;
  w2.set("bad", mismatched);
  EXPECT_THROW(w2.serialize(), InternalError);
}

}  // namespace
}  // namespace glacier::gguf
