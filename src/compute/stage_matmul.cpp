// StageMatmul: activation preparation into preallocated storage, then a row-parallel matmul over the
// output granules of one or several matrices.
#include "compute/stage_matmul.h"

#include <algorithm>

#include "util/error.h"

namespace glacier::compute {

namespace {

// Whether two matrices take the same prepared activations.
bool same_form(const kernels::Matrix& a, const kernels::Matrix& b) {
  return a.type == b.type && (a.packed != nullptr) == (b.packed != nullptr) && a.cols == b.cols;
}

}  // namespace

kernels::PreparedActivations StageMatmul::prepare(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx,
                                                  uint8_t* storage) {
  if (n_rows < kParallelPrepareRows) return kernels::prepare_activations(w, x, n_rows, ldx, storage);
  // Rows (or blocks of them) convert independently: split them over the threads like the products.
  const size_t row_bytes = kernels::activation_bytes(w, 1);
  const int64_t granule = kernels::prepared_row_granule(w);
  pool_.parallel_for((n_rows + granule - 1) / granule, [&](int64_t b, int64_t e, int) {
    const int64_t r0 = b * granule, r1 = std::min(n_rows, e * granule);
    kernels::prepare_activations(w, x + r0 * ldx, r1 - r0, ldx, storage + static_cast<size_t>(r0) * row_bytes);
  });
  return kernels::prepare_activations(w, x, 0, ldx, storage).with_rows(n_rows);
}

void StageMatmul::reserve(const kernels::Matrix& w, int64_t max_rows) {
  if (!w.data) return;
  const size_t need = kernels::activation_bytes(w, max_rows);
  for (auto& storage : act_storage_)
    if (need > storage.size()) storage.resize(need);
}

void StageMatmul::operator()(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx, float* y) {
  several({{&w, y}}, x, n_rows, ldx);
}

void StageMatmul::several(std::initializer_list<Output> outputs, const float* x, int64_t n_rows, int64_t ldx) {
  if (n_rows == 0) return;
  GLACIER_ASSERT(outputs.size() <= static_cast<size_t>(kMaxOutputs), "at most four products share an input");
  // Each output's prepared activations: converted once per distinct form.
  kernels::PreparedActivations prepared[kMaxForms];
  const kernels::Matrix* form_of[kMaxForms] = {};
  int form_index[kMaxOutputs] = {};
  int n_forms = 0, n = 0;
  int64_t granule_end[kMaxOutputs] = {};  // cumulative output granules, matrix after matrix
  for (const Output& out : outputs) {
    const kernels::Matrix& w = *out.w;
    int f = 0;
    while (f < n_forms && !same_form(*form_of[f], w)) ++f;
    if (f == n_forms) {
      GLACIER_ASSERT(n_forms < kMaxForms, "at most two activation forms share an input");
      GLACIER_ASSERT(kernels::activation_bytes(w, n_rows) <= act_storage_[f].size(),
                     "activation storage reserved for this matrix and batch");
      prepared[f] = prepare(w, x, n_rows, ldx, act_storage_[f].data());
      form_of[f] = &w;
      ++n_forms;
    }
    form_index[n] = f;
    const int64_t granule = kernels::output_granule(w);
    granule_end[n] = (n ? granule_end[n - 1] : 0) + (w.rows + granule - 1) / granule;
    ++n;
  }
  // Threads take whole output granules (a packed matrix's 16-row groups) of the concatenated outputs.
  const Output* outs = outputs.begin();
  auto product = [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t start = i ? granule_end[i - 1] : 0;
      const int64_t lo = std::max(b, start), hi = std::min(e, granule_end[i]);
      if (lo >= hi) continue;
      const kernels::Matrix& w = *outs[i].w;
      const int64_t granule = kernels::output_granule(w);
      kernels::matmul(w, prepared[form_index[i]], outs[i].y, w.rows, (lo - start) * granule,
                      std::min(w.rows, (hi - start) * granule));
    }
  };
  const int64_t granules = granule_end[n - 1];
  if (n_rows >= kClaimedChunksBelowRows) {
    pool_.parallel_for(granules, product);
    return;
  }
  // Decode-sized batches: a product streams its weights in a few hundred microseconds, so a thread that
  // the machine holds up for a while leaves the other waiting for a good part of it. Chunks taken as
  // threads finish share such a delay out (every output row is computed whole by one call, so the
  // results do not depend on which thread took which chunk). Even chunks keep decode's two-group tiles.
  const int64_t per_chunk = (granules + kChunksPerThread * pool_.size() - 1) / (kChunksPerThread * pool_.size());
  pool_.parallel_for_claimed(granules, (per_chunk + 1) / 2 * 2, product);
}

}  // namespace glacier::compute
