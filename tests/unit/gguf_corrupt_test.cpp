// GGUF reader on damaged files: each case patches a valid file (or cuts it short) and expects an
// InputError naming the file and the problem, never a crash (this binary also runs under ASan).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace glacier::gguf {
namespace {

using Bytes = std::vector<uint8_t>;

// The valid file every case starts from. Names of equal length let cases turn one into another.
Writer base_writer() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("test.k1", 7);
  w.set_u32("test.k2", 8);
  w.set_string("test.name", "tiny");
  w.set_i32_array("test.list", {1, 2, 3});
  w.set_string_array("test.words", {"a", "bc"});
  w.set_bool("test.flag", true);
  w.add_tensor("blk.0.a", TensorType::F32, {8, 2}, Bytes(8 * 2 * 4, 1));
  w.add_tensor("blk.0.b", TensorType::Q8_0, {32, 2}, Bytes(2 * 34, 2));
  w.add_tensor("blk.0.c", TensorType::F32, {2, 2, 2, 2}, Bytes(16 * 4, 3));
  return w;
}

Bytes base_bytes() { return base_writer().serialize(); }

// Offset of the `nth` occurrence of `s` in `b` (the test fails loudly if it is absent).
size_t find(const Bytes& b, const std::string& s, int nth = 0) {
  for (size_t i = 0; i + s.size() <= b.size(); ++i) {
    if (std::memcmp(b.data() + i, s.data(), s.size()) == 0 && nth-- == 0) return i;
  }
  throw std::logic_error("test setup: '" + s + "' not in the base file");
}

template <typename T>
void poke(Bytes& b, size_t at, T v) {
  if (at + sizeof(T) > b.size()) throw std::logic_error("test setup: poke past the end");
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Field offsets inside the serialized base file.
constexpr size_t kVersionAt = 4, kTensorCountAt = 8, kKvCountAt = 16;
size_t value_at(const Bytes& b, const std::string& key) {
  return find(b, key) + key.size() + 4;
}  // after type
size_t tensor_field(const Bytes& b, const std::string& name, int n_dims, const std::string& field) {
  size_t ndims_at = find(b, name) + name.size();
  if (field == "n_dims") return ndims_at;
  if (field == "ne") return ndims_at + 4;
  if (field == "type") return ndims_at + 4 + 8 * n_dims;
  return ndims_at + 4 + 8 * n_dims + 4;  // offset
}

Bytes cut(size_t n) {
  Bytes b = base_bytes();
  b.resize(n);
  return b;
}

struct CorruptCase {
  std::string name;
  std::function<Bytes()> make;
  std::vector<std::string> fragments;  // each must appear in the message
};

std::vector<CorruptCase> cases() {
  std::vector<CorruptCase> c;
  auto patched = [](std::function<void(Bytes&)> patch) {
    return [patch] {
      Bytes b = base_bytes();
      patch(b);
      return b;
    };
  };
  auto written = [](std::function<void(Writer&)> edit) {
    return [edit] {
      Writer w = base_writer();
      edit(w);
      return w.serialize();
    };
  };
  c.push_back({"bad_magic", patched([](Bytes& b) { b[3] = 'X'; }), {"magic", "47 47 55 58"}});
  c.push_back({"version_1", patched([](Bytes& b) { poke<uint32_t>(b, kVersionAt, 1); }), {"version 1"}});
  c.push_back({"version_4", patched([](Bytes& b) { poke<uint32_t>(b, kVersionAt, 4); }), {"version 4"}});
  c.push_back(
      {"big_endian", patched([](Bytes& b) { poke<uint32_t>(b, kVersionAt, 0x03000000); }), {"big-endian"}});
  c.push_back({"empty_file", [] { return Bytes(); }, {"too short"}});
  c.push_back({"cut_in_magic", [] { return cut(3); }, {"too short"}});
  c.push_back({"cut_in_counts", [] { return cut(20); }, {"too short"}});
  // A cut early in the metadata leaves too few bytes for the declared number of keys.
  c.push_back({"cut_early_in_metadata",
               [] { return cut(find(base_bytes(), "general.architecture") + 5); },
               {"key/value count 7 is impossible"}});
  c.push_back({"cut_in_key_name",
               [] { return cut(find(base_bytes(), "test.flag") + 5); },
               {"key #6", "string length 9", "past the end of the file"}});
  c.push_back({"cut_before_value",
               [] { return cut(value_at(base_bytes(), "test.flag")); },
               {"key 'test.flag'", "bool value", "past the end of the file"}});
  c.push_back({"cut_in_array",
               [] { return cut(value_at(base_bytes(), "test.list") + 4 + 8 + 6); },
               {"key 'test.list'", "array count 3 of int32", "cannot fit"}});
  c.push_back({"cut_in_tensor_info",
               [] { return cut(tensor_field(base_bytes(), "blk.0.b", 2, "ne") + 3); },
               {"tensor 'blk.0.b'", "past the end of the file"}});
  c.push_back({"cut_in_data",
               [] {
                 Bytes b = base_bytes();
                 b.pop_back();
                 return b;
               },
               {"tensor 'blk.0.c'", "ends past the end of the file"}});
  c.push_back({"string_length_past_eof",
               patched([](Bytes& b) { poke<uint64_t>(b, value_at(b, "test.name"), 1000000); }),
               {"key 'test.name'", "string length 1000000", "past the end of the file"}});
  c.push_back({"key_length_past_eof",
               patched([](Bytes& b) { poke<uint64_t>(b, find(b, "test.k1") - 8, uint64_t{1} << 62); }),
               {"key #1", "string length 4611686018427387904"}});
  c.push_back({"huge_array_count",
               patched([](Bytes& b) { poke<uint64_t>(b, value_at(b, "test.list") + 4, uint64_t{1} << 60); }),
               {"key 'test.list'", "array count 1152921504606846976"}});
  c.push_back({"huge_string_array_count",
               patched([](Bytes& b) { poke<uint64_t>(b, value_at(b, "test.words") + 4, uint64_t{1} << 60); }),
               {"key 'test.words'", "array count 1152921504606846976 of string"}});
  c.push_back({"huge_kv_count",
               patched([](Bytes& b) { poke<uint64_t>(b, kKvCountAt, uint64_t{1} << 62); }),
               {"key/value count 4611686018427387904"}});
  c.push_back({"huge_tensor_count",
               patched([](Bytes& b) { poke<uint64_t>(b, kTensorCountAt, ~uint64_t{0}); }),
               {"tensor count 18446744073709551615"}});
  c.push_back({"unknown_value_type",
               patched([](Bytes& b) { poke<uint32_t>(b, find(b, "test.k1") + 7, 99); }),
               {"key 'test.k1'", "unknown value type 99"}});
  c.push_back({"unknown_array_elem_type",
               patched([](Bytes& b) { poke<uint32_t>(b, value_at(b, "test.list"), 13); }),
               {"key 'test.list'", "unknown array element type 13"}});
  c.push_back({"bool_not_0_or_1",
               patched([](Bytes& b) { b[value_at(b, "test.flag")] = 2; }),
               {"key 'test.flag'", "0 or 1"}});
  c.push_back({"duplicate_key",
               patched([](Bytes& b) { b[find(b, "test.k2") + 6] = '1'; }),
               {"key 'test.k1'", "duplicate key"}});
  c.push_back({"arrays_nested_too_deep",
               written([](Writer& w) {
                 Value v;
                 v.type = ValueType::UINT8;
                 v.data = uint64_t{1};
                 for (int i = 0; i < 12; ++i) {
                   Array a;
                   a.elem_type = v.type;
                   a.items.push_back(v);
                   v.type = ValueType::ARRAY;
                   v.data = std::move(a);
                 }
                 w.set("test.deep", v);
               }),
               {"key 'test.deep'", "nested deeper than 8"}});
  c.push_back({"alignment_zero",
               written([](Writer& w) { w.set_u32("general.alignment", 0); }),
               {"general.alignment", "alignment 0", "power of two"}});
  c.push_back({"alignment_three",
               written([](Writer& w) { w.set_u32("general.alignment", 3); }),
               {"general.alignment", "alignment 3", "power of two"}});
  c.push_back({"alignment_wrong_type",
               written([](Writer& w) { w.set_string("general.alignment", "32"); }),
               {"general.alignment", "expected uint32, found string"}});
  c.push_back({"tensor_offset_past_eof",
               patched([](Bytes& b) { poke<uint64_t>(b, tensor_field(b, "blk.0.b", 2, "offset"), 1 << 20); }),
               {"tensor 'blk.0.b'", "1048576", "ends past the end of the file"}});
  c.push_back(
      {"tensor_offset_overflow",
       patched([](Bytes& b) { poke<uint64_t>(b, tensor_field(b, "blk.0.b", 2, "offset"), ~uint64_t{31}); }),
       {"tensor 'blk.0.b'", "ends past the end of the file"}});
  c.push_back({"tensor_offset_misaligned",
               patched([](Bytes& b) {
                 size_t at = tensor_field(b, "blk.0.b", 2, "offset");
                 uint64_t off;
                 std::memcpy(&off, b.data() + at, 8);
                 poke<uint64_t>(b, at, off + 4);
               }),
               {"tensor 'blk.0.b'", "not a multiple of the alignment 32"}});
  // blk.0.c's data moved onto blk.0.a's: both stay inside the file, so only the overlap betrays it.
  c.push_back({"tensor_offset_overlaps_another",
               patched([](Bytes& b) { poke<uint64_t>(b, tensor_field(b, "blk.0.c", 4, "offset"), 0); }),
               {"tensor 'blk.0.c'", "overlaps the data of tensor 'blk.0.a'", "corrupt tensor data offset"}});
  c.push_back({"unknown_tensor_type_4",
               patched([](Bytes& b) { poke<uint32_t>(b, tensor_field(b, "blk.0.a", 2, "type"), 4); }),
               {"tensor 'blk.0.a'", "unknown tensor type id 4"}});
  c.push_back({"unknown_tensor_type_99",
               patched([](Bytes& b) { poke<uint32_t>(b, tensor_field(b, "blk.0.a", 2, "type"), 99); }),
               {"tensor 'blk.0.a'", "unknown tensor type id 99"}});
  c.push_back({"n_dims_5",
               patched([](Bytes& b) { poke<uint32_t>(b, tensor_field(b, "blk.0.c", 4, "n_dims"), 5); }),
               {"tensor 'blk.0.c'", "n_dims is 5"}});
  c.push_back({"n_dims_0",
               patched([](Bytes& b) { poke<uint32_t>(b, tensor_field(b, "blk.0.a", 2, "n_dims"), 0); }),
               {"tensor 'blk.0.a'", "n_dims is 0"}});
  c.push_back({"negative_dim",
               patched([](Bytes& b) { poke<int64_t>(b, tensor_field(b, "blk.0.a", 2, "ne") + 8, -3); }),
               {"tensor 'blk.0.a'", "ne[1] = -3", "negative"}});
  c.push_back({"shape_overflows_int64",
               patched([](Bytes& b) {
                 size_t at = tensor_field(b, "blk.0.c", 4, "ne");
                 for (int d = 0; d < 4; ++d) poke<uint64_t>(b, at + 8 * d, uint64_t{1} << 20);
               }),
               {"tensor 'blk.0.c'", "[1048576, 1048576, 1048576, 1048576]", "overflows int64"}});
  c.push_back({"byte_size_overflows",
               patched([](Bytes& b) {
                 // 2^62 f32 elements fit int64, their 2^64 bytes do not fit 64 bits.
                 size_t at = tensor_field(b, "blk.0.c", 4, "ne");
                 poke<uint64_t>(b, at, uint64_t{1} << 62);
                 for (int d = 1; d < 4; ++d) poke<uint64_t>(b, at + 8 * d, 1);
               }),
               {"tensor 'blk.0.c'", "overflows 64 bits"}});
  c.push_back({"row_not_multiple_of_block",
               patched([](Bytes& b) { poke<uint64_t>(b, tensor_field(b, "blk.0.b", 2, "ne"), 48); }),
               {"tensor 'blk.0.b'", "ne[0] = 48", "q8_0 block size 32"}});
  c.push_back({"duplicate_tensor_name",
               patched([](Bytes& b) { b[find(b, "blk.0.b") + 6] = 'a'; }),
               {"tensor 'blk.0.a'", "duplicate tensor name"}});
  return c;
}

// gtest prints parameters of failing cases; the name says which one without dumping raw bytes.
void PrintTo(const CorruptCase& c, std::ostream* os) { *os << c.name; }

class GgufCorrupt : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(GgufCorrupt, RefusedWithAMessageNamingFileAndProblem) {
  const CorruptCase& cc = GetParam();
  std::string path = glacier::testing::scratch_dir("gguf_corrupt") + "/" + cc.name + ".gguf";
  Bytes bytes = cc.make();
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good());
  }
  try {
    File::open(path);
    FAIL() << cc.name << ": opened without error";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message should start with the path: " << msg;
    for (const std::string& frag : cc.fragments) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' not in: " << msg;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufCorrupt, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) { return info.param.name; });

TEST(GgufCorruptSanity, BaseFileOpens) {
  std::string path = glacier::testing::scratch_dir("gguf_corrupt_base") + "/base.gguf";
  base_writer().write(path);
  auto f = File::open(path);
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->get_uint("test.k2"), 8u);
}

// Every prefix of the valid file is refused cleanly: no prefix is itself a valid file, because the
// last tensor's data ends exactly at the end.
TEST(GgufCorruptSanity, EveryTruncationIsAnInputError) {
  Bytes full = base_bytes();
  std::string path = glacier::testing::scratch_dir("gguf_corrupt_cut") + "/cut.gguf";
  for (size_t n = 0; n < full.size(); ++n) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(full.data()), static_cast<std::streamsize>(n));
    }
    EXPECT_THROW(File::open(path), InputError) << "cut at " << n << " of " << full.size();
  }
}

// Random single-byte damage in the header region either still parses or gives an InputError;
// any other exception or a crash (ASan) fails.
TEST(GgufCorruptSanity, RandomByteDamageNeverCrashes) {
  constexpr int kTrials = 400;
  Bytes full = base_bytes();
  size_t header_end = find(full, "blk.0.c") + 64;  // past the last tensor info
  std::mt19937 rng(12345);
  std::string path = glacier::testing::scratch_dir("gguf_corrupt_fuzz") + "/fuzz.gguf";
  int refused = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Bytes b = full;
    size_t at = rng() % header_end;
    b[at] = static_cast<uint8_t>(rng());
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    try {
      File::open(path);
    } catch (const InputError&) {
      ++refused;
    }
  }
  // Most damaged bytes sit in lengths, counts, types or magic, so some must be refused.
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace glacier::gguf
