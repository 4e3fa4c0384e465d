// Fuzzes the GGUF reader (gguf::File::parse) and what reads a parsed file: typed getters, the model
// config, the tokenizer vocabulary and the weight shard. Checks that bad input only ever raises
// InputError, that every tensor lies inside the input, and that writing a parsed file reads back the same.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../common/gguf_value_equal.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace {

using namespace glacier;

[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "gguf_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

// Runs `read`, which may refuse the file with InputError but must not fail in any other way (an
// unexpected exception type escapes to libFuzzer and is reported as a crash).
template <typename Read>
void refused_or_ok(Read&& read) {
  try {
    read();
  } catch (const InputError&) {
  }
}

void check_tensors_inside(const gguf::File& file, const uint8_t* bytes, size_t size) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.n_dims < 1 || t.n_dims > 4) violated("tensor '" + t.name + "' has " + std::to_string(t.n_dims) + " dims");
    const auto traits = gguf::type_traits(static_cast<uint32_t>(t.type));
    if (!traits) violated("tensor '" + t.name + "' has an unknown type");
    if (t.n_elements() % traits->block_elems != 0 ||
        static_cast<uint64_t>(t.n_elements() / traits->block_elems) * traits->block_bytes != t.n_bytes) {
      violated("tensor '" + t.name + "': n_bytes does not match its shape and type");
    }
    if (t.data < bytes || t.n_bytes > size || t.data > bytes + (size - t.n_bytes))
      violated("tensor '" + t.name + "' data lies outside the input");
    if (static_cast<uint64_t>(t.data - bytes) != file.data_offset() + t.offset)
      violated("tensor '" + t.name + "' data pointer disagrees with its offset");
    if (t.offset % file.alignment() != 0 || file.data_offset() % file.alignment() != 0)
      violated("tensor '" + t.name + "' is not aligned");
    if (file.find_tensor(t.name) != &t) violated("find_tensor('" + t.name + "') does not find it");
  }
}

// Every getter on every key: each returns a value or throws InputError, whatever the key's type.
void read_every_key(const gguf::File& file) {
  for (const auto& key_value : file.metadata()) {
    const std::string& key = key_value.first;  // a plain reference: clang 14 cannot capture bindings
    if (file.find(key) != &key_value.second) violated("find('" + key + "') does not find it");
    refused_or_ok([&] { file.get_string(key); });
    refused_or_ok([&] { file.get_uint(key); });
    refused_or_ok([&] { file.get_int(key); });
    refused_or_ok([&] { file.get_float(key); });
    refused_or_ok([&] { file.get_bool(key); });
    refused_or_ok([&] { file.get_string_array(key); });
    refused_or_ok([&] { file.get_float_array(key); });
    refused_or_ok([&] { file.get_int_array(key); });
  }
}

// What the engine reads from a model file after the reader has accepted it.
void load_like_the_engine(const gguf::File& file) {
  refused_or_ok([&] {
    const model::ModelConfig cfg = model::read_model_config(file);
    model::weight_bytes(file, cfg);
    model::load_shard(file, cfg, model::LayerRange{0, cfg.n_layer}, true, true);
  });
  refused_or_ok([&] {
    const auto tokenizer = model::Tokenizer::from_gguf(file);
    tokenizer->encode("Hello world <s> 123", true, true);
    for (int32_t id = 0; id < tokenizer->n_vocab() && id < 512; ++id) tokenizer->token_to_piece(id, true);
  });
}

// Writing what was read and reading it again gives the same metadata and tensors (the writer and the
// reader agree on the format, including odd but valid files).
void check_write_read_round_trip(const gguf::File& file) {
  gguf::Writer writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const gguf::TensorInfo& t : file.tensors()) {
    writer.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                      std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::vector<uint8_t> written = writer.serialize();
  const auto again = gguf::File::parse(written.data(), written.size(), "rewritten");
  if (again->metadata().size() != file.metadata().size()) violated("round trip changed the key count");
  for (size_t i = 0; i < file.metadata().size(); ++i) {
    const auto& [key, value] = file.metadata()[i];
    if (again->metadata()[i].first != key || !testing::same_gguf_value(again->metadata()[i].second, value))
      violated("round trip changed key '" + key + "'");
  }
  if (again->tensors().size() != file.tensors().size()) violated("round trip changed the tensor count");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& a = file.tensors()[i];
    const gguf::TensorInfo& b = again->tensors()[i];
    if (a.name != b.name || a.type != b.type || a.n_dims != b.n_dims || a.n_bytes != b.n_bytes ||
        !std::equal(a.ne, a.ne + 4, b.ne) || (a.n_bytes && std::memcmp(a.data, b.data, a.n_bytes) != 0))
      violated("round trip changed tensor '" + a.name + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<gguf::File> file;
  try {
    file = gguf::File::parse(data, size, "fuzz.gguf");
  } catch (const InputError&) {
    return 0;  // refused with a message: the expected outcome for almost every input
  }
  check_tensors_inside(*file, data, size);
  read_every_key(*file);
  load_like_the_engine(*file);
  check_write_read_round_trip(*file);
  return 0;
}
