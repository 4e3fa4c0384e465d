// Packing at load holds the weights about once: a tensor's mapped pages leave the rank as soon as its
// matrices are packed, so mapped pages plus packed copies never reach twice the shard (they did while the
// pages were released only after the whole shard was packed).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"

namespace {

using namespace glacier;

// Resident bytes of this process's mappings of `path` (/proc/self/smaps), or -1 when it cannot be read.
int64_t mapped_resident_bytes(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  int64_t total = 0;
  bool in_file = false;
  std::string line;
  while (std::getline(smaps, line)) {
    // A mapping's header starts with its address range; its fields start with "Name:".
    const std::string first = line.substr(0, line.find(' '));
    const bool header = !first.empty() && first.back() != ':';
    if (header) {
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in_file && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      int64_t kib = 0;
      fields >> kib;
      total += kib * 1024;
    }
  }
  return total;
}

TEST(WeightPacking, MappedPagesPlusPackedCopiesStayNearTheShardsBytes) {
  model::SyntheticModelSpec s = model::synthetic_preset("tiny");
  s.n_embd = 256;
  s.n_ff = 1024;
  s.n_layer = 6;
  s.weight_type = kernels::WeightType::Q8_0;
  const std::string path = glacier::testing::scratch_dir("weight-packing") + "/q8.gguf";
  model::write_synthetic_model(s, path);
  auto f = gguf::File::open(path);
  const model::ModelConfig cfg = model::read_model_config(*f);
  if (mapped_resident_bytes(path) < 0) GTEST_SKIP() << "needs /proc/self/smaps to read the mapping's resident bytes";

  uint64_t shard_bytes = 0;  // the packable matrices' bytes, as the progress reports them
  int64_t worst = 0, worst_at = 0, calls = 0;
  const model::LoadProgress watch = [&](uint64_t done, uint64_t total, const char* pass) {
    if (std::string(pass) != "packed") return;
    shard_bytes = total;
    ++calls;
    const int64_t held = mapped_resident_bytes(path) + static_cast<int64_t>(done);
    if (held > worst) worst = held, worst_at = static_cast<int64_t>(done);
  };
  const model::ShardWeights w = model::load_shard(*f, cfg, {0, cfg.n_layer}, true, true, nullptr, watch);
  ASSERT_GT(calls, 6 * 7) << "a progress report after each packed matrix (7 a layer)";
  // One layer's largest tensor (ffn_up/gate/down: 256 x 1024 Q8_0, 272 KiB) may be held twice while it
  // is packed; the rest of the slack covers the unpacked tensors (embedding, norms) and fault-around.
  const int64_t slack = 2 << 20;
  EXPECT_LE(worst, static_cast<int64_t>(shard_bytes) + slack)
      << "mapped + packed peaked at " << worst << " bytes after " << worst_at << " of " << shard_bytes
      << " packed: the mapped pages of packed tensors were kept";
  EXPECT_FALSE(w.layer.empty());
}

}  // namespace
