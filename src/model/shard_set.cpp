// Shard sets: one GGUF file per pipeline stage plus a JSON manifest. The manifest is written last and read
// first; every shard repeats the whole file's metadata (the config and the tokenizer need nothing else) and
// names its place in the set, so a rank can check it holds the right file before reading a weight.
#include "model/shard_set.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/gguf_stream_writer.h"
#include "model/model_config.h"
#include "util/error.h"

namespace glacier::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kManifestFormat = "glacier-shard-set";
constexpr int kManifestVersion = 1;

std::string stage_file_name(int stage, int n_stages) {
  return "stage-" + std::to_string(stage) + "-of-" + std::to_string(n_stages) + ".gguf";
}

// The layer a "blk.N.*" tensor belongs to, or -1 for a tensor outside the blocks.
int32_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  char* end = nullptr;
  const long layer = std::strtol(name.c_str() + 4, &end, 10);
  return end && *end == '.' ? static_cast<int32_t>(layer) : -1;
}

// Whether stage `stage` of `n_stages` (holding `layers`) needs the tensor.
bool stage_needs(const std::string& name, LayerRange layers, int stage, int n_stages, bool tied_head) {
  const int32_t layer = layer_of(name);
  if (layer >= 0) return layer >= layers.first && layer < layers.last;
  const bool first = stage == 0, last = stage == n_stages - 1;
  if (name == "token_embd.weight") return first || (last && tied_head);
  if (name == "output.weight" || name == "output_norm.weight") return last;
  return true;  // read by every layer (rope_freqs, rope_factors_long/short)
}

void check_split(const std::string& where, const std::vector<LayerRange>& split, int32_t n_layer) {
  if (split.empty()) throw InputError(where + ": expected at least one stage, found none");
  int32_t next = 0;
  for (size_t i = 0; i < split.size(); ++i) {
    if (split[i].first != next || split[i].last <= split[i].first)
      throw InputError(where + ": stage " + std::to_string(i) + ": expected layers starting at " + std::to_string(next) +
                       " and not empty, found " + std::to_string(split[i].first) + ":" + std::to_string(split[i].last));
    next = split[i].last;
  }
  if (next != n_layer)
    throw InputError(where + ": expected the stages to cover the model's " + std::to_string(n_layer) +
                     " layers, found them ending at " + std::to_string(next));
}

json manifest_json(const ShardSet& set) {
  json stages = json::array();
  for (int i = 0; i < set.n_stages(); ++i)
    stages.push_back({{"file", fs::path(set.files[i]).filename().string()},
                      {"first_layer", set.split[i].first},
                      {"last_layer", set.split[i].last}});
  return {{"format", kManifestFormat},
          {"version", kManifestVersion},
          {"source", set.source_name},
          {"source_sha256", set.source_sha256},
          {"n_layer", set.n_layer},
          {"weight_bytes",
           {{"per_layer", set.bytes.per_layer},
            {"per_layer_experts", set.bytes.per_layer_experts},
            {"embedding", set.bytes.embedding},
            {"head", set.bytes.head}}},
          {"stages", stages}};
}

// A manifest field of the expected JSON type, or InputError naming the file and the field.
const json& field(const json& object, const std::string& key, json::value_t type, const std::string& where,
                  const char* expected) {
  auto it = object.find(key);
  const bool ok = it != object.end() &&
                  (it->type() == type || (type == json::value_t::number_unsigned && it->is_number_unsigned()));
  if (!ok)
    throw InputError(where + ": field \"" + key + "\": expected " + expected + ", found " +
                     (it == object.end() ? std::string("no such field") : it->dump()));
  return *it;
}

}  // namespace

bool is_shard_set_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  return fs::path(path).extension() == ".json";
}

ShardSet read_shard_set(const std::string& path) {
  std::error_code ec;
  ShardSet set;
  set.manifest_path = fs::is_directory(path, ec) ? (fs::path(path) / kShardManifestName).string() : path;
  const std::string& where = set.manifest_path;
  std::ifstream in(where);
  if (!in)
    throw InputError(where + ": expected a shard set's manifest (written by glacier_shard), found no readable file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(where + ": expected a JSON manifest, found a syntax error: " + e.what());
  }
  if (!doc.is_object()) throw InputError(where + ": expected a JSON object, found " + std::string(doc.type_name()));
  using T = json::value_t;
  if (field(doc, "format", T::string, where, "\"glacier-shard-set\"") != kManifestFormat ||
      field(doc, "version", T::number_unsigned, where, "1") != kManifestVersion)
    throw InputError(where + ": expected format \"" + std::string(kManifestFormat) + "\" version " +
                     std::to_string(kManifestVersion) + ", found " + doc["format"].dump() + " version " + doc["version"].dump());
  set.source_name = field(doc, "source", T::string, where, "the source file's name");
  set.source_sha256 = field(doc, "source_sha256", T::string, where, "a SHA-256 in hex");
  set.n_layer = field(doc, "n_layer", T::number_unsigned, where, "the layer count").get<int32_t>();
  const json& bytes = field(doc, "weight_bytes", T::object, where, "an object");
  set.bytes.per_layer = field(bytes, "per_layer", T::array, where, "an array of byte counts").get<std::vector<uint64_t>>();
  set.bytes.embedding = field(bytes, "embedding", T::number_unsigned, where, "a byte count").get<uint64_t>();
  set.bytes.head = field(bytes, "head", T::number_unsigned, where, "a byte count").get<uint64_t>();
  // Manifests cut before the expert bytes were counted have none: their experts then count whole for every
  // member of an expert group (the memory check errs towards refusing).
  set.bytes.per_layer_experts =
      bytes.contains("per_layer_experts")
          ? field(bytes, "per_layer_experts", T::array, where, "an array of byte counts").get<std::vector<uint64_t>>()
          : std::vector<uint64_t>(set.bytes.per_layer.size(), 0);
  auto one_per_layer = [&](const char* key, const std::vector<uint64_t>& v) {
    if (v.size() != static_cast<size_t>(set.n_layer))
      throw InputError(where + ": field \"weight_bytes." + key + "\": expected " + std::to_string(set.n_layer) +
                       " entries (n_layer), found " + std::to_string(v.size()));
  };
  one_per_layer("per_layer", set.bytes.per_layer);
  one_per_layer("per_layer_experts", set.bytes.per_layer_experts);
  const fs::path dir = fs::path(where).parent_path();
  for (const json& stage : field(doc, "stages", T::array, where, "an array of stages")) {
    if (!stage.is_object()) throw InputError(where + ": field \"stages\": expected objects, found " + stage.dump());
    set.files.push_back((dir / field(stage, "file", T::string, where, "a file name").get<std::string>()).string());
    set.split.push_back({field(stage, "first_layer", T::number_unsigned, where, "a layer").get<int32_t>(),
                         field(stage, "last_layer", T::number_unsigned, where, "a layer").get<int32_t>()});
  }
  check_split(where + ": field \"stages\"", set.split, set.n_layer);
  return set;
}

std::unique_ptr<gguf::File> open_shard(const ShardSet& set, int stage) {
  auto file = gguf::File::open(set.files.at(static_cast<size_t>(stage)));
  const std::string& path = file->path();
  auto expect_uint = [&](const char* key, int64_t expected, const std::string& what) {
    const auto v = file->find_uint(key);
    if (!v || static_cast<int64_t>(*v) != expected)
      throw InputError(path + ": key '" + key + "': expected " + std::to_string(expected) + " (" + what + " in " +
                       set.manifest_path + "), found " + (v ? std::to_string(*v) : std::string("no such key")) +
                       ": the file belongs to another shard set or split; cut the model again with glacier_shard");
  };
  expect_uint(kShardIndexKey, stage, "its stage");
  expect_uint(kShardCountKey, set.n_stages(), "the stage count");
  expect_uint(kShardFirstLayerKey, set.split[stage].first, "its first layer");
  expect_uint(kShardLastLayerKey, set.split[stage].last, "its end layer");
  const auto source = file->find_string(kShardSourceKey);
  if (source != set.source_sha256)
    throw InputError(path + ": key '" + std::string(kShardSourceKey) + "': expected " + set.source_sha256 +
                     " (the source in " + set.manifest_path + "), found " + source.value_or("no such key") +
                     ": the file was cut from another model; cut the model again with glacier_shard");
  return file;
}

std::string shard_key_of(const gguf::File& file) {
  for (const char* key : {kShardIndexKey, kShardCountKey, kShardSourceKey})
    if (file.find(key)) return key;
  return "";
}

ShardSet write_shard_set(const std::string& model_path, const std::string& source_sha256,
                         const std::vector<LayerRange>& split, const std::string& out_dir, const ShardProgress& progress) {
  const auto source = gguf::File::open(model_path);
  if (const std::string key = shard_key_of(*source); !key.empty())
    throw InputError(model_path + ": key '" + key + "': expected a whole model file, found one stage of a shard set");
  const ModelConfig cfg = read_model_config(*source);  // refuses what glacier cannot run, before writing anything
  check_split(model_path + ": the split", split, cfg.n_layer);
  const bool tied_head = cfg.spec.output == OutputTensor::AlwaysTied || !source->find_tensor("output.weight");

  ShardSet set;
  set.source_name = fs::path(model_path).filename().string();
  set.source_sha256 = source_sha256;
  set.n_layer = cfg.n_layer;
  set.split = split;
  set.bytes = weight_bytes(*source, cfg);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw InputError(out_dir + ": expected a directory for the shards, found it cannot be created: " + ec.message());
  set.manifest_path = (fs::path(out_dir) / kShardManifestName).string();
  fs::remove(set.manifest_path, ec);  // a half-rewritten set must not pass for a complete one

  const int n = static_cast<int>(split.size());
  for (int stage = 0; stage < n; ++stage) {
    const std::string path = (fs::path(out_dir) / stage_file_name(stage, n)).string();
    if (fs::equivalent(path, model_path, ec))
      throw InputError(path + ": expected a new shard file, found the model being cut: choose another --out directory");
    if (progress) progress(stage, path);
    gguf::StreamWriter w(source->alignment());
    for (const auto& [key, value] : source->metadata()) w.set(key, value);
    w.set_u32(kShardIndexKey, static_cast<uint32_t>(stage));
    w.set_u32(kShardCountKey, static_cast<uint32_t>(n));
    w.set_u32(kShardFirstLayerKey, static_cast<uint32_t>(split[stage].first));
    w.set_u32(kShardLastLayerKey, static_cast<uint32_t>(split[stage].last));
    w.set_string(kShardSourceKey, source_sha256);
    std::vector<const gguf::TensorInfo*> kept;
    for (const gguf::TensorInfo& t : source->tensors()) {
      if (!stage_needs(t.name, split[stage], stage, n, tied_head)) continue;
      w.add_tensor_info(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
      kept.push_back(&t);
    }
    w.open(path);
    for (const gguf::TensorInfo* t : kept) {
      w.write_data(t->data, t->n_bytes);
      source->release(*t);  // a stage's tensors are read once: keep the page cache for the next ones
    }
    w.close();
    set.files.push_back(path);
  }
  const std::string tmp = set.manifest_path + ".tmp";
  {
    std::ofstream out(tmp);
    out << manifest_json(set).dump(2) << "\n";
    if (!out) throw InputError(tmp + ": expected to write the manifest, found the write failed");
  }
  fs::rename(tmp, set.manifest_path, ec);
  if (ec) throw InputError(set.manifest_path + ": expected to write the manifest, found: " + ec.message());
  return set;
}

}  // namespace glacier::model
