// StageMatmul: activation preparation into preallocated storage, then a row-parallel matmul.
#include "compute/stage_matmul.h"

#include <algorithm>

#include "util/error.h"

namespace glacier::compute {

void StageMatmul::reserve(const kernels::Matrix& w, int64_t max_rows) {
  if (!w.data) return;
  const size_t need = kernels::activation_bytes(w, max_rows);
  if (need > act_storage_.size()) act_storage_.resize(need);
}

void StageMatmul::operator()(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx, float* y) {
  if (n_rows == 0) return;
  GLACIER_ASSERT(kernels::activation_bytes(w, n_rows) <= act_storage_.size(),
                 "activation storage reserved for this matrix and batch");
  kernels::PreparedActivations a = kernels::prepare_activations(w, x, n_rows, ldx, act_storage_.data());
  // Threads take whole output granules (a packed matrix's 16-row groups).
  const int64_t granule = kernels::output_granule(w);
  pool_.parallel_for((w.rows + granule - 1) / granule, [&](int64_t b, int64_t e, int) {
    kernels::matmul(w, a, y, w.rows, b * granule, std::min(w.rows, e * granule));
  });
}

}  // namespace glacier::compute
