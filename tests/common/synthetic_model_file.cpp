// Test helper: synthetic models written once per test process.
#include "common/synthetic_model_file.h"

#include <map>
#include <mutex>

#include "common/test_env.h"

namespace glacier::testing {

std::string synthetic_model_once(const model::SyntheticModelSpec& spec, const std::string& scratch_name) {
  static std::mutex mutex;
  static std::map<std::string, std::string> written;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = written.find(scratch_name);
  if (it != written.end()) return it->second;
  const std::string path = scratch_dir(scratch_name) + "/model.gguf";
  model::write_synthetic_model(spec, path);
  written.emplace(scratch_name, path);
  return path;
}

std::string tiny_q8_0_model_once(int32_t n_layer, uint64_t seed, const std::string& scratch_name) {
  model::SyntheticModelSpec spec = model::synthetic_preset("tiny");
  spec.n_layer = n_layer;
  spec.weight_type = kernels::WeightType::Q8_0;
  spec.seed = seed;
  return synthetic_model_once(spec, scratch_name);
}

std::string write_scratch_model(const model::SyntheticModelSpec& spec, const std::string& scratch_name,
                                const std::string& file_name) {
  const std::string path = scratch_dir(scratch_name) + "/" + file_name;
  model::write_synthetic_model(spec, path);
  return path;
}

}  // namespace glacier::testing
