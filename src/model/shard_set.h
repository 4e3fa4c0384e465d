// A model cut into one GGUF file per pipeline stage (glacier_shard), so a node stores and reads only its
// layers: writing such a set from a whole file, its manifest, and opening the one file a stage needs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_fwd.h"
#include "model/model_weights.h"

namespace glacier::model {

// Every shard file carries these keys besides the whole file's metadata; they tie it to its manifest.
inline constexpr const char* kShardIndexKey = "glacier.shard.index";
inline constexpr const char* kShardCountKey = "glacier.shard.count";
inline constexpr const char* kShardFirstLayerKey = "glacier.shard.first_layer";
inline constexpr const char* kShardLastLayerKey = "glacier.shard.last_layer";  // exclusive
inline constexpr const char* kShardSourceKey = "glacier.shard.source_sha256";

inline constexpr const char* kShardManifestName = "manifest.json";

struct ShardSet {
  std::string manifest_path;
  std::string source_name;    // the whole file's name when it was cut (for messages)
  std::string source_sha256;  // of the whole file: a sharded run's results carry the same model digest
  int32_t n_layer = 0;
  std::vector<LayerRange> split;   // one range per stage
  std::vector<std::string> files;  // one path per stage, resolved beside the manifest
  WeightBytes bytes;               // the whole model's (the memory check plans every stage)
  int n_stages() const { return static_cast<int>(split.size()); }
};

// Whether `path` names a shard set: a directory (holding manifest.json) or a manifest file itself.
bool is_shard_set_path(const std::string& path);

// Reads and checks a manifest (DIR or DIR/manifest.json); throws InputError naming the file, the field,
// what was expected and what was found.
ShardSet read_shard_set(const std::string& path);

// Opens stage `stage`'s file and checks its glacier.shard.* keys against the manifest (its index, the
// stage count, its layers and the source digest), so a file of another set or another split is refused.
std::unique_ptr<gguf::File> open_shard(const ShardSet& set, int stage);

// Names the shard-set key of a file given where a whole model is expected, or "" for a whole file.
std::string shard_key_of(const gguf::File& file);

using ShardProgress = std::function<void(int stage, const std::string& path)>;

// Cuts the whole file `model_path` (whose SHA-256 is `source_sha256`) into one file per range of `split`
// in `out_dir` (created if missing; files there of another set are replaced), then writes the manifest
// last, so a set without one is known to be incomplete. Each file holds its layers' tensors, the token
// embedding on the first stage (and the last when the head is tied), the head on the last stage, the
// tensors every layer reads (rope factors) on every stage, and the whole file's metadata.
ShardSet write_shard_set(const std::string& model_path, const std::string& source_sha256,
                         const std::vector<LayerRange>& split, const std::string& out_dir,
                         const ShardProgress& progress = {});

}  // namespace glacier::model
