// GGUF reader: a file with every value type and several tensor types round-trips through the
// Writer unchanged (v3 and v2), typed getters convert or refuse as documented, type traits match the spec.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace glacier::gguf {
namespace {

Value make(ValueType t, decltype(Value::data) payload) {
  Value v;
  v.type = t;
  v.data = std::move(payload);
  return v;
}

Value make_array(ValueType elem, std::vector<Value> items) {
  Array a;
  a.elem_type = elem;
  a.items = std::move(items);
  return make(ValueType::ARRAY, std::move(a));
}

// Deterministic, distinct bytes per tensor so a mix-up of data between tensors is visible.
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return b;
}

struct ExpectedTensor {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;
  size_t n_bytes;  // from the block sizes of the spec, not from type_traits
};

// Byte sizes: F32 4/elem; F16 2/elem; Q8_0 34 per 32; Q4_K 144 per 256; BF16 2/elem; I32 4/elem.
const std::vector<ExpectedTensor> kTensors = {
    {"vec.f32", TensorType::F32, {3}, 12},
    {"mat.f16", TensorType::F16, {4, 2}, 16},
    {"cube.q8_0", TensorType::Q8_0, {64, 3, 2}, 12 * 34},
    {"hyper.q4_k", TensorType::Q4_K, {256, 2, 1, 3}, 6 * 144},
    {"row.bf16", TensorType::BF16, {5, 1}, 10},
    {"ids.i32", TensorType::I32, {7}, 28},
};

std::vector<std::pair<std::string, Value>> all_value_kinds() {
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("t.u8", make(ValueType::UINT8, uint64_t{255}));
  kv.emplace_back("t.i8", make(ValueType::INT8, int64_t{-128}));
  kv.emplace_back("t.u16", make(ValueType::UINT16, uint64_t{65535}));
  kv.emplace_back("t.i16", make(ValueType::INT16, int64_t{-32768}));
  kv.emplace_back("t.u32", make(ValueType::UINT32, uint64_t{4000000000u}));
  kv.emplace_back("t.i32", make(ValueType::INT32, int64_t{-2000000000}));
  kv.emplace_back("t.u64", make(ValueType::UINT64, std::numeric_limits<uint64_t>::max()));
  kv.emplace_back("t.i64", make(ValueType::INT64, std::numeric_limits<int64_t>::min()));
  kv.emplace_back("t.f32", make(ValueType::FLOAT32, double{0.15625f}));
  kv.emplace_back("t.f64", make(ValueType::FLOAT64, 1.0 / 3.0));
  kv.emplace_back("t.true", make(ValueType::BOOL, true));
  kv.emplace_back("t.false", make(ValueType::BOOL, false));
  kv.emplace_back("t.str", make(ValueType::STRING, std::string("hello, \xe4\xb8\x96\xe7\x95\x8c")));
  kv.emplace_back("t.empty_str", make(ValueType::STRING, std::string()));
  kv.emplace_back("t.bad_utf8", make(ValueType::STRING, std::string("\xff\xfe\x00z", 4)));
  kv.emplace_back("t.empty_arr", make_array(ValueType::INT32, {}));
  kv.emplace_back("t.str_arr", make_array(ValueType::STRING, {make(ValueType::STRING, std::string("a")),
                                                              make(ValueType::STRING, std::string()),
                                                              make(ValueType::STRING, std::string("ccc"))}));
  kv.emplace_back("t.f32_arr", make_array(ValueType::FLOAT32,
                                          {make(ValueType::FLOAT32, 1.5), make(ValueType::FLOAT32, -2.25)}));
  kv.emplace_back("t.nested",
                  make_array(ValueType::ARRAY,
                             {make_array(ValueType::UINT16, {make(ValueType::UINT16, uint64_t{1}),
                                                             make(ValueType::UINT16, uint64_t{2})}),
                              make_array(ValueType::STRING, {make(ValueType::STRING, std::string("x"))}),
                              make_array(ValueType::BOOL, {})}));
  return kv;
}

void expect_same_value(const Value& want, const Value& got, const std::string& key) {
  SCOPED_TRACE("key " + key);
  ASSERT_EQ(want.type, got.type);
  ASSERT_EQ(want.data.index(), got.data.index());
  if (const Array* wa = std::get_if<Array>(&want.data)) {
    const Array& ga = std::get<Array>(got.data);
    EXPECT_EQ(wa->elem_type, ga.elem_type);
    ASSERT_EQ(wa->items.size(), ga.items.size());
    for (size_t i = 0; i < wa->items.size(); ++i)
      expect_same_value(wa->items[i], ga.items[i], key + "[" + std::to_string(i) + "]");
  } else if (const std::string* ws = std::get_if<std::string>(&want.data)) {
    EXPECT_EQ(*ws, std::get<std::string>(got.data));
  } else if (const uint64_t* wu = std::get_if<uint64_t>(&want.data)) {
    EXPECT_EQ(*wu, std::get<uint64_t>(got.data));
  } else if (const int64_t* wi = std::get_if<int64_t>(&want.data)) {
    EXPECT_EQ(*wi, std::get<int64_t>(got.data));
  } else if (const double* wd = std::get_if<double>(&want.data)) {
    EXPECT_EQ(*wd, std::get<double>(got.data));  // exact: every test value is representable
  } else {
    EXPECT_EQ(std::get<bool>(want.data), std::get<bool>(got.data));
  }
}

Writer full_writer(uint64_t alignment) {
  Writer w(alignment);
  for (const auto& [k, v] : all_value_kinds()) w.set(k, v);
  uint8_t seed = 1;
  for (const ExpectedTensor& t : kTensors) w.add_tensor(t.name, t.type, t.ne, pattern(t.n_bytes, seed++));
  return w;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

void expect_full_contents(const File& f, uint64_t alignment) {
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  auto kinds = all_value_kinds();
  const auto& md = f.metadata();
  size_t first = alignment == 32 ? 0 : 1;  // the writer puts general.alignment first when it differs
  ASSERT_EQ(md.size(), kinds.size() + first);
  if (first) {
    EXPECT_EQ(md[0].first, "general.alignment");
    EXPECT_EQ(f.get_uint("general.alignment"), alignment);
  } else {
    EXPECT_EQ(f.find("general.alignment"), nullptr);
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ(md[first + i].first, kinds[i].first);
    expect_same_value(kinds[i].second, md[first + i].second, kinds[i].first);
    ASSERT_NE(f.find(kinds[i].first), nullptr);
  }
  ASSERT_EQ(f.tensors().size(), kTensors.size());
  uint8_t seed = 1;
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const ExpectedTensor& want = kTensors[i];
    const TensorInfo& got = f.tensors()[i];
    SCOPED_TRACE("tensor " + want.name);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.type, want.type);
    ASSERT_EQ(got.n_dims, static_cast<int>(want.ne.size()));
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) {
      int64_t expected_ne = d < got.n_dims ? want.ne[d] : 1;
      EXPECT_EQ(got.ne[d], expected_ne) << "dim " << d;
      n *= expected_ne;
    }
    EXPECT_EQ(got.n_elements(), n);
    EXPECT_EQ(got.offset % alignment, 0u);
    ASSERT_EQ(got.n_bytes, want.n_bytes);
    ASSERT_NE(got.data, nullptr);
    std::vector<uint8_t> bytes = pattern(want.n_bytes, seed++);
    EXPECT_EQ(std::memcmp(got.data, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(f.find_tensor(want.name), &got);
  }
  EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
}

TEST(GgufReader, RoundTripsEveryValueTypeAndTensorShape) {
  std::string path = glacier::testing::scratch_dir("gguf_reader_rt") + "/all.gguf";
  full_writer(32).write(path);
  auto f = File::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->version(), 3u);
  expect_full_contents(*f, 32);
}

TEST(GgufReader, RoundTripsWithNonDefaultAlignment) {
  constexpr uint64_t kAlignment = 256;
  std::string path = glacier::testing::scratch_dir("gguf_reader_align") + "/aligned.gguf";
  full_writer(kAlignment).write(path);
  auto f = File::open(path);
  expect_full_contents(*f, kAlignment);
}

TEST(GgufReader, ReadsVersion2) {
  std::vector<uint8_t> bytes = full_writer(32).serialize();
  // v2 and v3 share the little-endian layout; only the version field (bytes 4..7) differs.
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);
  std::string path = glacier::testing::scratch_dir("gguf_reader_v2") + "/v2.gguf";
  write_bytes(path, bytes);
  auto f = File::open(path);
  EXPECT_EQ(f->version(), 2u);
  expect_full_contents(*f, 32);
}

TEST(GgufReader, PrefetchLeavesDataIntact) {
  std::string path = glacier::testing::scratch_dir("gguf_reader_prefetch") + "/p.gguf";
  full_writer(32).write(path);
  auto f = File::open(path);
  for (const TensorInfo& t : f->tensors()) f->prefetch(t);
  expect_full_contents(*f, 32);
}

TEST(GgufReader, MissingFileNamesPath) {
  const std::string path = "/nonexistent-dir/none.gguf";
  glacier::testing::expect_input_error([&] { File::open(path); }, {path});
}

class GgufGetters : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = glacier::testing::scratch_dir("gguf_getters") + "/g.gguf";
    Writer w = full_writer(32);
    w.set("t.i32_pos", make(ValueType::INT32, int64_t{17}));
    w.set("t.u32_arr_big", make_array(ValueType::UINT32, {make(ValueType::UINT32, uint64_t{4000000000u})}));
    w.set("t.u8_arr", make_array(ValueType::UINT8, {make(ValueType::UINT8, uint64_t{3}),
                                                    make(ValueType::UINT8, uint64_t{250})}));
    w.set_i32_array("t.i32_arr", {-1, 0, 2147483647});
    w.write(path_);
    f_ = File::open(path_);
  }

  // fn must throw an InputError whose message starts with the file's path and names every fragment.
  template <typename Fn>
  void expect_refusal(Fn fn, std::initializer_list<std::string_view> fragments,
                      const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE()) {
    const std::string msg = glacier::testing::input_error_message(fn, caller_file, caller_line);
    EXPECT_EQ(msg.rfind(path_, 0), 0u) << "message should start with the path: " << msg;
    glacier::testing::expect_mentions(msg, fragments, caller_file, caller_line);
  }

  std::string path_;
  std::unique_ptr<File> f_;
};

TEST_F(GgufGetters, IntegersWidenWhenLossless) {
  EXPECT_EQ(f_->get_uint("t.u8"), 255u);
  EXPECT_EQ(f_->get_uint("t.u16"), 65535u);
  EXPECT_EQ(f_->get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f_->get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f_->get_uint("t.i32_pos"), 17u);
  EXPECT_EQ(f_->get_int("t.i8"), -128);
  EXPECT_EQ(f_->get_int("t.i16"), -32768);
  EXPECT_EQ(f_->get_int("t.i32"), -2000000000);
  EXPECT_EQ(f_->get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f_->get_int("t.u32"), 4000000000);
  EXPECT_EQ(f_->find_uint("t.u16"), std::optional<uint64_t>(65535u));
  EXPECT_EQ(f_->find_uint("t.absent"), std::nullopt);
}

TEST_F(GgufGetters, FloatsAcceptFloatAndIntegerValues) {
  EXPECT_EQ(f_->get_float("t.f32"), 0.15625);
  EXPECT_EQ(f_->get_float("t.f64"), 1.0 / 3.0);
  EXPECT_EQ(f_->get_float("t.i32"), -2000000000.0);
  EXPECT_EQ(f_->get_float("t.u8"), 255.0);
  EXPECT_EQ(f_->find_float("t.absent"), std::nullopt);
}

TEST_F(GgufGetters, StringsBoolsAndArrays) {
  EXPECT_EQ(f_->get_string("t.str"), "hello, \xe4\xb8\x96\xe7\x95\x8c");
  EXPECT_EQ(f_->get_string("t.empty_str"), "");
  EXPECT_EQ(f_->get_string("t.bad_utf8"), std::string("\xff\xfe\x00z", 4));
  EXPECT_EQ(f_->find_string("t.absent"), std::nullopt);
  EXPECT_TRUE(f_->get_bool("t.true"));
  EXPECT_FALSE(f_->get_bool("t.false"));
  EXPECT_EQ(f_->find_bool("t.false"), std::optional<bool>(false));
  EXPECT_EQ(f_->get_string_array("t.str_arr"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f_->get_float_array("t.f32_arr"), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(f_->get_int_array("t.i32_arr"), (std::vector<int32_t>{-1, 0, 2147483647}));
  EXPECT_EQ(f_->get_int_array("t.u8_arr"), (std::vector<int32_t>{3, 250}));
  EXPECT_TRUE(f_->get_int_array("t.empty_arr").empty());
}

TEST_F(GgufGetters, WrongTypeNamesKeyAndBothTypes) {
  expect_refusal([&] { f_->get_string("t.u32"); }, {"'t.u32'", "expected string", "found uint32"});
  expect_refusal([&] { f_->get_uint("t.str"); }, {"'t.str'", "unsigned integer", "found string"});
  expect_refusal([&] { f_->get_uint("t.i32"); },
                 {"'t.i32'", "unsigned integer", "int32 -2000000000"});
  expect_refusal([&] { f_->get_int("t.u64"); },
                 {"'t.u64'", "integer", "uint64 18446744073709551615"});
  expect_refusal([&] { f_->get_int("t.f32"); }, {"'t.f32'", "integer", "found float32"});
  expect_refusal([&] { f_->get_float("t.str"); }, {"'t.str'", "float", "found string"});
  expect_refusal([&] { f_->get_bool("t.u8"); }, {"'t.u8'", "expected bool", "found uint8"});
  expect_refusal([&] { f_->find_string("t.nested"); },
                 {"'t.nested'", "expected string", "found array of array"});
  expect_refusal([&] { f_->find_uint("t.f64"); },
                 {"'t.f64'", "unsigned integer", "found float64"});
  expect_refusal([&] { f_->find_float("t.true"); }, {"'t.true'", "float", "found bool"});
  expect_refusal([&] { f_->find_bool("t.str"); }, {"'t.str'", "expected bool", "found string"});
  expect_refusal([&] { f_->get_string_array("t.f32_arr"); },
                 {"'t.f32_arr'", "expected array of string", "found array of float32"});
  expect_refusal([&] { f_->get_string_array("t.str"); },
                 {"'t.str'", "expected array of string", "found string"});
  expect_refusal([&] { f_->get_float_array("t.str_arr"); },
                 {"'t.str_arr'", "expected array of float32", "found array of string"});
  expect_refusal([&] { f_->get_int_array("t.f32_arr"); },
                 {"'t.f32_arr'", "expected array of int32", "found array of float32"});
  expect_refusal([&] { f_->get_int_array("t.u32_arr_big"); },
                 {"'t.u32_arr_big'", "element 0", "int32"});
}

TEST_F(GgufGetters, MissingKeyNamesKeyAndExpectedType) {
  expect_refusal([&] { f_->get_string("llama.nothing"); },
                 {"'llama.nothing'", "missing", "string"});
  expect_refusal([&] { f_->get_uint("llama.block_count"); },
                 {"'llama.block_count'", "missing", "unsigned integer"});
  expect_refusal([&] { f_->get_int("x.int"); }, {"'x.int'", "missing", "integer"});
  expect_refusal([&] { f_->get_float("x.f"); }, {"'x.f'", "missing", "float"});
  expect_refusal([&] { f_->get_bool("x.b"); }, {"'x.b'", "missing", "bool"});
  expect_refusal([&] { f_->get_string_array("x.sa"); }, {"'x.sa'", "missing", "array of string"});
  expect_refusal([&] { f_->get_float_array("x.fa"); }, {"'x.fa'", "missing", "array of float32"});
  expect_refusal([&] { f_->get_int_array("x.ia"); }, {"'x.ia'", "missing", "array of int32"});
}

// The block geometry of every type GGUF defines, as published in the format's documentation.
TEST(GgufTensorType, TraitsMatchTheSpec) {
  struct Row {
    uint32_t id;
    const char* name;
    int64_t block_elems;
    size_t block_bytes;
  };
  const Row rows[] = {
      {0, "f32", 1, 4},       {1, "f16", 1, 2},       {30, "bf16", 1, 2},     {2, "q4_0", 32, 18},
      {3, "q4_1", 32, 20},    {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},
      {9, "q8_1", 32, 36},    {10, "q2_K", 256, 84},  {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144},
      {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210}, {15, "q8_K", 256, 292}, {24, "i8", 1, 1},
      {25, "i16", 1, 2},      {26, "i32", 1, 4},      {27, "i64", 1, 8},      {28, "f64", 1, 8},
      {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136},
  };
  for (const Row& r : rows) {
    auto t = type_traits(r.id);
    ASSERT_TRUE(t.has_value()) << "type id " << r.id;
    EXPECT_STREQ(t->name, r.name);
    EXPECT_EQ(t->block_elems, r.block_elems) << r.name;
    EXPECT_EQ(t->block_bytes, r.block_bytes) << r.name;
    EXPECT_EQ(type_name(static_cast<TensorType>(r.id)), r.name);
  }
  for (uint32_t unknown : {4u, 5u, 16u, 22u, 29u, 31u, 1000u, 0xffffffffu}) {
    EXPECT_FALSE(type_traits(unknown).has_value()) << "type id " << unknown;
  }
}

}  // namespace
}  // namespace glacier::gguf
