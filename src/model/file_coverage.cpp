// The allow-list of metadata keys per architecture and the check that every tensor is mapped. A key
// that would change the computation and is not implemented (softcapping, longrope scaling, logit
// or residual scales, parallel residual, ...) is refused, not skipped: the next unknown key is refused
// too, without anyone having to add it to a deny-list.
#include "model/file_coverage.h"

#include <cmath>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/error.h"

namespace glacier::model {
namespace {

// One entry of the allow-lists below: a key (whole, or the part a table matches) and why it is safe.
struct AllowedKey {
  const char* key;
  const char* why;
};

// Prefixes of the keys outside the `<arch>.` prefix that never change the computation.
constexpr AllowedKey kHarmlessPrefixes[] = {
    {"general.", "provenance (name, license, file type, quantization version)"},
    {"tokenizer.", "read by the tokenizer, which checks what it uses"},
    {"quantize.", "llama-quantize's importance-matrix provenance"},
    {"glacier.shard.", "a shard file's place in its set (shard_set.h), checked against the manifest when the set is opened"},
};

// `<arch>.` keys every supported architecture understands, by their suffix after `<arch>.`.
constexpr AllowedKey kCommonKeys[] = {
    {"context_length", "read: the training context"},
    {"embedding_length", "read"},
    {"block_count", "read"},
    {"feed_forward_length", "read"},
    {"attention.head_count", "read"},
    {"attention.head_count_kv", "read"},
    {"attention.key_length", "read: the head size of q and k (may differ from n_embd / n_head)"},
    {"attention.value_length", "read: must equal key_length"},
    {"attention.layer_norm_rms_epsilon", "read"},
    {"rope.freq_base", "read"},
    {"rope.dimension_count", "read: the rotated part of a head (may be smaller than the head)"},
    {"rope.scaling.type", "read: none, linear or yarn (anything else refused)"},
    {"rope.scaling.factor", "read"},
    {"rope.scale_linear", "read: the older name of rope.scaling.factor"},
    {"rope.scaling.attn_factor", "read: cos and sin multiplied by it"},
    {"rope.scaling.original_context_length", "read: YaRN's original context, and the one past which Phi-3 uses its long factors"},
    {"rope.scaling.finetuned", "harmless: a flag llama.cpp records and never computes with"},
    {"vocab_size", "harmless: the vocabulary is tokenizer.ggml.tokens, which the weights' shapes are checked against"},
};

std::string value_text(const gguf::Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v.data)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.data)) return std::to_string(*d);
  if (const auto* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v.data)) {
    std::string quoted = "'";  // appended, not concatenated: gcc 12 warns falsely (-Wrestrict) on "'" + s + "'"
    quoted.append(*s, 0, 80);
    quoted += '\'';
    return quoted;
  }
  const auto& a = std::get<gguf::Array>(v.data);
  return std::string("an array of ") + std::to_string(a.items.size()) + " " + gguf::value_type_name(a.elem_type);
}

bool is_zero(const gguf::Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return *u == 0;
  if (const auto* i = std::get_if<int64_t>(&v.data)) return *i == 0;
  return false;
}

// The `<arch>.` keys of this architecture's row: the common ones plus what the row reads.
std::set<std::string> known_suffixes(const ArchSpec& spec) {
  std::set<std::string> s;
  for (const AllowedKey& k : kCommonKeys) s.insert(k.key);
  if (spec.moe != MoeUse::Never) s.insert({"expert_count", "expert_used_count"});
  if (spec.expert_ff_key) s.insert(spec.expert_ff_key);
  if (spec.shared_expert && !spec.mla) s.insert("expert_shared_feed_forward_length");
  if (spec.mla)
    s.insert({"attention.q_lora_rank", "attention.kv_lora_rank", "leading_dense_block_count", "expert_shared_count",
              "expert_weights_scale", "expert_weights_norm", "expert_gating_func", "rope.scaling.yarn_log_multiplier"});
  if (spec.sliding_window_key) s.insert(spec.sliding_window_key);
  if (spec.logit_softcapping) s.insert({"attn_logit_softcapping", "final_logit_softcapping"});
  if (spec.granite_scales) s.insert({"embedding_scale", "residual_scale", "attention.scale", "logit_scale"});
  return s;
}

}  // namespace

void check_keys_understood(const gguf::File& f, const ModelConfig& c) {
  const std::string prefix = c.arch + ".";
  const std::set<std::string> known = known_suffixes(c.spec);
  for (const auto& [key, value] : f.metadata()) {
    bool harmless = false;
    for (const AllowedKey& h : kHarmlessPrefixes) harmless = harmless || key.rfind(h.key, 0) == 0;
    if (harmless) continue;
    if (key.rfind(prefix, 0) == 0) {
      const std::string suffix = key.substr(prefix.size());
      if (known.count(suffix)) continue;
      // A dense architecture's file may say it has no experts.
      if ((suffix == "expert_count" || suffix == "expert_used_count") && is_zero(value)) continue;
    }
    throw InputError(f.path() + ": key '" + key + "': expected only keys glacier implements for architecture '" +
                     c.arch + "' (general.*, tokenizer.*, quantize.* and the " + prefix +
                     "* keys it reads; an ignored key could change the computation), found it set to " +
                     value_text(value) + ", which glacier does not implement");
  }
}

void check_tensors_used(const gguf::File& f, const ModelConfig& c) {
  const std::vector<std::string> names = expected_tensor_names(f, c);
  const std::set<std::string> used(names.begin(), names.end());
  for (const gguf::TensorInfo& t : f.tensors())
    if (!used.count(t.name))
      throw InputError(f.path() + ": tensor '" + t.name + "': expected only the tensors glacier uses for architecture '" +
                       c.arch + "', found this one, which glacier does not implement (ignoring it could change the "
                       "computation)");
}

}  // namespace glacier::model
