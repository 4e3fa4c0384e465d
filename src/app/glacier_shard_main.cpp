// glacier_shard: cuts a GGUF model into one file per pipeline stage plus a manifest, so each node of a
// cluster stores and maps only its own layers (`glacier_mpi --model DIR`).
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <variant>

#include "app/model_digest.h"
#include "app/tool_command_line.h"
#include "gguf/gguf_file.h"
#include "io/hdf5_results.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/shard_set.h"
#include "planning/partition.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace {

struct Request {
  std::string model, out, layers, from;
  int ranks = 0;
};

std::optional<Request> parse(int argc, char** argv) {
  Request r;
  po::options_description opts(
      "usage: glacier_shard --model M.gguf (--ranks N | --layers SPLIT | --from RESULTS.h5) --out DIR\n\n"
      "Writes DIR/stage-K-of-N.gguf (the whole file's metadata and one stage's tensors) and DIR/manifest.json;\n"
      "run the job with glacier_mpi --model DIR on N ranks a pipeline replica");
  opts.add_options()
      ("help,h", "print this help")
      ("model,m", po::value(&r.model), "the whole GGUF model file")
      ("ranks,n", po::value(&r.ranks), "stages, split by weight bytes as glacier_mpi --partition bytes splits them")
      ("layers", po::value(&r.layers), "the split by hand, e.g. 0:5,5:11,11:16")
      ("from", po::value(&r.from), "the split an earlier run used (its results file's layer_split)")
      ("out,o", po::value(&r.out), "directory for the shard files and the manifest");
  const std::optional<po::variables_map> options = glacier::app::parse_tool_command_line(argc, argv, opts);
  if (!options) return std::nullopt;  // --help
  const po::variables_map& vm = *options;
  if (r.model.empty()) throw glacier::InputError("option --model: expected a GGUF file, found nothing (the option is required)");
  if (r.out.empty()) throw glacier::InputError("option --out: expected a directory, found nothing (the option is required)");
  const int given = static_cast<int>(vm.count("ranks") + vm.count("layers") + vm.count("from"));
  if (given != 1)
    throw glacier::InputError("options --ranks, --layers, --from: expected exactly one of them, found " + std::to_string(given));
  if (vm.count("ranks") && r.ranks < 1)
    throw glacier::InputError("option --ranks: expected a stage count >= 1, found " + std::to_string(r.ranks));
  return r;
}

// The split an earlier run recorded (one pipeline's, replicas repeat it).
std::string split_from_results(const std::string& path) {
  const auto attrs = glacier::io::read_root_attributes(path);
  const auto it = attrs.find("layer_split");
  const std::string* split = it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
  if (!split || split->empty())
    throw glacier::InputError(path + ": expected a root attribute layer_split (a glacier_mpi results file), found none");
  return *split;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<Request> r = parse(argc, argv);
    if (!r) return 0;
    const auto file = glacier::gguf::File::open(r->model);
    const glacier::model::ModelConfig cfg = glacier::model::read_model_config(*file);
    std::vector<glacier::model::LayerRange> split;
    if (r->ranks > 0) {
      split = glacier::planning::partition_by_bytes(glacier::model::weight_bytes(*file, cfg), r->ranks);
    } else {
      const std::string spec = r->layers.empty() ? split_from_results(r->from) : r->layers;
      const int stages = static_cast<int>(std::count(spec.begin(), spec.end(), ',')) + 1;
      split = glacier::planning::parse_layer_split(spec, cfg.n_layer, stages);
    }
    std::fprintf(stderr, "hashing %s (SHA-256; the manifest records it, and a sharded run's results carry it)\n",
                 r->model.c_str());
    const std::string digest = glacier::app::cached_sha256_file(r->model).sha256;
    const glacier::model::ShardSet set = glacier::model::write_shard_set(
        r->model, digest, split, r->out, [&](int stage, const std::string& path) {
          std::fprintf(stderr, "writing stage %d of %zu (layers %d:%d): %s\n", stage, split.size(), split[stage].first,
                       split[stage].last, path.c_str());
        });
    std::printf("wrote %s: %d stages, split %s\n", set.manifest_path.c_str(), set.n_stages(),
                glacier::planning::format_layer_split(set.split).c_str());
    return 0;
  } catch (const glacier::InputError& e) {
    std::fprintf(stderr, "glacier_shard: error: %s\n", e.what());
    return 2;
  }
}
