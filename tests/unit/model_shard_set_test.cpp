// Shard sets (model/shard_set.h): each stage's file holds exactly the tensors its stage maps, byte for byte
// as in the whole file, plus the whole file's metadata; the manifest reads back as written; a file of
// another set or split, a broken manifest and a shard given as a whole model are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/shard_set.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace {

namespace model = glacier::model;
namespace gguf = glacier::gguf;
namespace fs = std::filesystem;

constexpr const char* kDigest = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::string write_model(const std::string& dir, const std::string& arch, int32_t n_layer) {
  model::SyntheticModelSpec s = model::synthetic_preset("tiny");
  s.arch = arch;
  s.n_layer = n_layer;
  const std::string path = dir + "/" + arch + ".gguf";
  model::write_synthetic_model(s, path);
  return path;
}

using glacier::testing::refusal_message;

// Which stage of `split` should hold a tensor of the whole file.
bool expected_in(const std::string& name, int stage, const std::vector<model::LayerRange>& split, bool tied) {
  const bool last = stage + 1 == static_cast<int>(split.size());
  if (name.rfind("blk.", 0) == 0) {
    const int layer = std::stoi(name.substr(4));
    return layer >= split[stage].first && layer < split[stage].last;
  }
  if (name == "token_embd.weight") return stage == 0 || (last && tied);
  if (name == "output.weight" || name == "output_norm.weight") return last;
  return true;
}

void check_set(const std::string& whole_path, const std::vector<model::LayerRange>& split, bool tied) {
  const std::string dir = fs::path(whole_path).parent_path().string() + "/shards";
  const model::ShardSet written = model::write_shard_set(whole_path, kDigest, split, dir);
  const model::ShardSet set = model::read_shard_set(dir);
  ASSERT_EQ(set.n_stages(), static_cast<int>(split.size()));
  EXPECT_EQ(set.source_sha256, kDigest);
  EXPECT_EQ(set.files, written.files);
  const auto whole = gguf::File::open(whole_path);
  const model::ModelConfig cfg = model::read_model_config(*whole);
  EXPECT_EQ(set.bytes.per_layer, model::weight_bytes(*whole, cfg).per_layer);
  EXPECT_EQ(set.bytes.per_layer_experts, model::weight_bytes(*whole, cfg).per_layer_experts);
  for (int stage = 0; stage < set.n_stages(); ++stage) {
    EXPECT_EQ(set.split[stage].first, split[stage].first);
    EXPECT_EQ(set.split[stage].last, split[stage].last);
    const auto shard = model::open_shard(set, stage);
    // Every whole-file key is there unchanged; the shard's own keys are the only additions.
    for (const auto& [key, value] : whole->metadata()) ASSERT_NE(shard->find(key), nullptr) << key;
    EXPECT_EQ(shard->metadata().size(), whole->metadata().size() + 5);
    EXPECT_EQ(model::read_model_config(*shard).n_layer, cfg.n_layer);
    std::set<std::string> held;
    for (const gguf::TensorInfo& t : shard->tensors()) {
      held.insert(t.name);
      const gguf::TensorInfo* w = whole->find_tensor(t.name);
      ASSERT_NE(w, nullptr) << t.name;
      ASSERT_EQ(t.n_bytes, w->n_bytes) << t.name;
      EXPECT_EQ(0, std::memcmp(t.data, w->data, t.n_bytes)) << "stage " << stage << " " << t.name;
    }
    for (const gguf::TensorInfo& t : whole->tensors())
      EXPECT_EQ(held.count(t.name) == 1, expected_in(t.name, stage, split, tied)) << "stage " << stage << " " << t.name;
  }
}

TEST(ShardSet, EachStageHoldsItsLayersTheEmbeddingFirstAndTheHeadLast) {
  const std::string dir = glacier::testing::scratch_dir("shard-set-llama");
  check_set(write_model(dir, "llama", 5), {{0, 1}, {1, 4}, {4, 5}}, false);
}

TEST(ShardSet, ATiedHeadPutsTheEmbeddingOnTheLastStageToo) {
  const std::string dir = glacier::testing::scratch_dir("shard-set-gemma2");
  check_set(write_model(dir, "gemma2", 26), {{0, 13}, {13, 26}}, true);
}

TEST(ShardSet, AFileOfAnotherSplitOrModelIsRefused) {
  const std::string dir = glacier::testing::scratch_dir("shard-set-mismatch");
  const std::string whole = write_model(dir, "llama", 4);
  const model::ShardSet a = model::write_shard_set(whole, kDigest, {{0, 2}, {2, 4}}, dir + "/a");
  const model::ShardSet b = model::write_shard_set(whole, kDigest, {{0, 1}, {1, 4}}, dir + "/b");
  fs::copy_file(b.files[1], a.files[1], fs::copy_options::overwrite_existing);
  std::string msg = refusal_message([&] { model::open_shard(a, 1); });
  EXPECT_NE(msg.find("glacier.shard.first_layer"), std::string::npos) << msg;
  EXPECT_NE(msg.find(a.files[1]), std::string::npos) << msg;

  const model::ShardSet c = model::write_shard_set(whole, std::string(64, 'f'), {{0, 2}, {2, 4}}, dir + "/c");
  fs::copy_file(c.files[0], a.files[0], fs::copy_options::overwrite_existing);
  msg = refusal_message([&] { model::open_shard(a, 0); });
  EXPECT_NE(msg.find("glacier.shard.source_sha256"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another model"), std::string::npos) << msg;

  // A shard is not a whole model: cutting it again is refused naming its key.
  msg = refusal_message([&] { model::write_shard_set(c.files[0], kDigest, {{0, 4}}, dir + "/d"); });
  EXPECT_NE(msg.find("glacier.shard."), std::string::npos) << msg;
  EXPECT_EQ(model::shard_key_of(*gguf::File::open(whole)), "");
}

TEST(ShardSet, ABrokenManifestIsRefusedNamingTheField) {
  const std::string dir = glacier::testing::scratch_dir("shard-set-manifest");
  const std::string whole = write_model(dir, "llama", 4);
  const model::ShardSet set = model::write_shard_set(whole, kDigest, {{0, 2}, {2, 4}}, dir + "/s");
  std::ifstream in(set.manifest_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"first_layer\": 2");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 16, "\"first_layer\": 3");
  std::ofstream(set.manifest_path) << text;
  std::string msg = refusal_message([&] { model::read_shard_set(dir + "/s"); });
  EXPECT_NE(msg.find("stage 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("starting at 2"), std::string::npos) << msg;
  msg = refusal_message([&] { model::read_shard_set(dir + "/nothing-here.json"); });
  EXPECT_NE(msg.find("nothing-here.json"), std::string::npos) << msg;
  // A split that does not cover the model is refused before anything is written.
  msg = refusal_message([&] { model::write_shard_set(whole, kDigest, {{0, 3}}, dir + "/t"); });
  EXPECT_NE(msg.find("4 layers"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir + "/t/manifest.json"));
}

// The stacked experts' bytes (the memory check of --expert-parallel): one entry a layer, or none in a manifest
// cut before they were counted, which then reads as no expert bytes (every expert counted whole).
TEST(ShardSet, ExpertBytesAreOneALayerOrAbsent) {
  const std::string dir = glacier::testing::scratch_dir("shard-set-experts");
  const std::string whole = write_model(dir, "llama", 4);
  const model::ShardSet set = model::write_shard_set(whole, kDigest, {{0, 2}, {2, 4}}, dir + "/s");
  auto rewrite = [&](const std::function<void(nlohmann::json&)>& change) {
    std::ifstream in(set.manifest_path);
    nlohmann::json doc = nlohmann::json::parse(in);
    change(doc);
    std::ofstream(set.manifest_path) << doc.dump(2);
  };
  rewrite([](nlohmann::json& doc) { doc["weight_bytes"].erase("per_layer_experts"); });
  EXPECT_EQ(model::read_shard_set(dir + "/s").bytes.per_layer_experts, std::vector<uint64_t>(4, 0));
  rewrite([](nlohmann::json& doc) { doc["weight_bytes"]["per_layer_experts"] = {0, 0, 0}; });
  const std::string msg = refusal_message([&] { model::read_shard_set(dir + "/s"); });
  EXPECT_NE(msg.find("weight_bytes.per_layer_experts\": expected 4 entries (n_layer), found 3"), std::string::npos) << msg;
}

}  // namespace
