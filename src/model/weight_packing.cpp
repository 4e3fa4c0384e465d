// Weight packing at load: collects the shard's matrices, packs each into its own aligned buffer, and
// releases an original tensor's pages as soon as its last matrix is packed (never while an unpacked
// matrix still reads it), so the rank never holds much more than its weights once.
#include "model/weight_packing.h"

#include <cstdlib>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/packed_gemm.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace glacier::model {
namespace {

std::vector<kernels::Matrix*> shard_matrices(ShardWeights& w) {
  std::vector<kernels::Matrix*> out;
  for (LayerWeights& l : w.layer) {
    for (kernels::Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.gate_shexp,
                               &l.up_shexp, &l.down_shexp, &l.shexp_gate, &l.wq_a, &l.wq_b, &l.wkv_a})
      out.push_back(m);
    for (auto* experts : {&l.gate_exps, &l.up_exps, &l.down_exps})
      for (kernels::Matrix& m : *experts) out.push_back(&m);
  }
  if (w.has_head) out.push_back(&w.output);
  return out;
}

// The tensor whose mapped bytes hold [data, data + n): views of fused tensors share one.
const gguf::TensorInfo* tensor_holding(const ShardWeights& w, const void* data) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (const gguf::TensorInfo* t : w.tensors)
    if (p >= t->data && p < t->data + t->n_bytes) return t;
  return nullptr;
}

}  // namespace

void pack_shard_weights(const gguf::File& file, ShardWeights& shard, ThreadPool* pool, const LoadProgress& progress) {
  // Every matrix of a tensor (a stacked expert tensor holds one per expert) is packed before its pages go:
  // releasing them only after the whole shard was packed held the shard's weights twice at the peak.
  std::set<const gguf::TensorInfo*> still_read;
  std::map<const gguf::TensorInfo*, int> unpacked;  // packable matrices of each tensor not packed yet
  if (shard.has_embedding) still_read.insert(tensor_holding(shard, shard.token_embd.data));
  std::vector<std::pair<kernels::Matrix*, const gguf::TensorInfo*>> to_pack;  // each with the tensor it views
  uint64_t total = 0, done = 0;
  for (kernels::Matrix* m : shard_matrices(shard)) {
    if (!m->data) continue;
    const gguf::TensorInfo* source = tensor_holding(shard, m->data);
    if (!kernels::packable(m->type)) {
      still_read.insert(source);
      continue;
    }
    ++unpacked[source];
    to_pack.emplace_back(m, source);
    total += static_cast<uint64_t>(m->rows) * m->row_bytes;
  }
  for (const auto& entry : to_pack) {
    // Named copies, not structured bindings: clang 14 cannot capture a binding in the lambda below.
    kernels::Matrix* const m = entry.first;
    const auto* const source = entry.second;
    const size_t bytes = kernels::packed_bytes(*m);
    auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(kernels::kPackAlign, bytes));
    if (!buffer) throw std::bad_alloc();
    shard.packed_storage.emplace_back(buffer);
    const int64_t groups = kernels::packed_groups(m->rows);
    if (pool) {
      pool->parallel_for(groups, [&](int64_t b, int64_t e, int) { kernels::pack_groups(*m, buffer, b, e); });
    } else {
      kernels::pack_groups(*m, buffer, 0, groups);
    }
    m->packed = buffer;
    if (source && --unpacked[source] == 0 && !still_read.count(source)) file.release(*source);
    done += static_cast<uint64_t>(m->rows) * m->row_bytes;
    if (progress) progress(done, total, "packed");
  }
}

}  // namespace glacier::model
