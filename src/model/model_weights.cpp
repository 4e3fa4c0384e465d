// Shard loading: tensor lookup by the llama naming scheme, shape and type checks with messages that
// name the tensor, and views (no copies) into the mapped file for the matrices.
#include "model/model_weights.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gguf/gguf_file.h"
#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace glacier::model {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string shape_str(const gguf::TensorInfo& t) {
  std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
  return shape_str(ne);
}

const gguf::TensorInfo& require_tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw InputError(f.path() + ": tensor '" + name + "': required by the model but missing from the file");
  return *t;
}

void check_shape(const gguf::File& f, const gguf::TensorInfo& t, const std::vector<int64_t>& expected) {
  bool ok = t.n_dims == static_cast<int>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i) ok = t.ne[i] == expected[i];
  if (!ok)
    throw InputError(f.path() + ": tensor '" + t.name + "': expected shape " + shape_str(expected) + ", found " +
                     shape_str(t));
}

kernels::Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows, uint64_t* bytes) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {cols, rows});
  kernels::Matrix m;
  m.type = weight_type_of(f, t);
  m.data = t.data;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(t.n_bytes / static_cast<uint64_t>(rows));
  m.block_sum_order = m.type == kernels::WeightType::Q4_0 && rows % 8 == 0;
  f.prefetch(t);
  *bytes += t.n_bytes;
  return m;
}

std::vector<float> norm_vector(const gguf::File& f, const std::string& name, int64_t n, uint64_t* bytes) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {n});
  std::vector<float> v(static_cast<size_t>(n));
  if (t.type == gguf::TensorType::F32) {
    std::memcpy(v.data(), t.data, static_cast<size_t>(n) * 4);
  } else if (t.type == gguf::TensorType::F16 || t.type == gguf::TensorType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = t.type == gguf::TensorType::F16 ? kernels::fp16_to_f32(h) : kernels::bf16_to_f32(h);
    }
  } else {
    throw InputError(f.path() + ": tensor '" + name + "': expected type f32, f16 or bf16 for a norm vector, found " +
                     gguf::type_name(t.type));
  }
  for (float x : v)
    if (!std::isfinite(x)) throw InputError(f.path() + ": tensor '" + name + "': expected finite values, found " + std::to_string(x));
  *bytes += t.n_bytes;
  return v;
}

std::string blk(int32_t layer, const char* what) { return "blk." + std::to_string(layer) + "." + what + ".weight"; }

}  // namespace


ShardWeights load_shard(const gguf::File& f, const ModelConfig& c, LayerRange layers, bool has_embedding,
                        bool has_head) {
  GLACIER_ASSERT(layers.first >= 0 && layers.first <= layers.last && layers.last <= c.n_layer, "layer range in model");
  ShardWeights w;
  w.layers = layers;
  w.has_embedding = has_embedding;
  w.has_head = has_head;
  if (has_embedding) w.token_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab, &w.bytes);
  for (int32_t l = layers.first; l < layers.last; ++l) {
    LayerWeights lw;
    lw.attn_norm = norm_vector(f, blk(l, "attn_norm"), c.n_embd, &w.bytes);
    lw.wq = matrix(f, blk(l, "attn_q"), c.n_embd, c.q_dim(), &w.bytes);
    lw.wk = matrix(f, blk(l, "attn_k"), c.n_embd, c.kv_dim(), &w.bytes);
    lw.wv = matrix(f, blk(l, "attn_v"), c.n_embd, c.kv_dim(), &w.bytes);
    lw.wo = matrix(f, blk(l, "attn_output"), c.q_dim(), c.n_embd, &w.bytes);
    lw.ffn_norm = norm_vector(f, blk(l, "ffn_norm"), c.n_embd, &w.bytes);
    lw.w_gate = matrix(f, blk(l, "ffn_gate"), c.n_embd, c.n_ff, &w.bytes);
    lw.w_up = matrix(f, blk(l, "ffn_up"), c.n_embd, c.n_ff, &w.bytes);
    lw.w_down = matrix(f, blk(l, "ffn_down"), c.n_ff, c.n_embd, &w.bytes);
    w.layer.push_back(std::move(lw));
  }
  if (has_head) {
    w.output_norm = norm_vector(f, "output_norm.weight", c.n_embd, &w.bytes);
    const char* head_name = f.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
    w.output = matrix(f, head_name, c.n_embd, c.n_vocab, &w.bytes);
  }
  return w;
}

WeightBytes weight_bytes(const gguf::File& f, const ModelConfig& c) {
  WeightBytes b;
  b.per_layer.assign(static_cast<size_t>(c.n_layer), 0);
  const std::string prefix = "blk.";
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind(prefix, 0) == 0) {
      long layer = std::strtol(t.name.c_str() + prefix.size(), nullptr, 10);
      if (layer >= 0 && layer < c.n_layer) b.per_layer[static_cast<size_t>(layer)] += t.n_bytes;
    } else if (t.name == "token_embd.weight") {
      b.embedding += t.n_bytes;
      if (!f.find_tensor("output.weight")) b.head += t.n_bytes;
    } else if (t.name == "output.weight" || t.name == "output_norm.weight") {
      b.head += t.n_bytes;
    }
  }
  return b;
}

}  // namespace glacier::model
