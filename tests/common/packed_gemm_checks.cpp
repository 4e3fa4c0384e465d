// Checks shared by the packed GEMM tests: packing, running matmul, twin / split / bounds properties.
#include "common/packed_gemm_checks.h"

#include <algorithm>
#include <cstring>

#include "kernels/packed_gemm.h"

namespace glacier::testing {

using kernels::Matrix;

Matrix with_packed_copy(const Matrix& m, std::vector<uint8_t>& storage) {
  storage.resize(kernels::packed_bytes(m) + kernels::kPackAlign);
  uint8_t* aligned = storage.data() + (kernels::kPackAlign - reinterpret_cast<uintptr_t>(storage.data()) %
                                                                  kernels::kPackAlign) % kernels::kPackAlign;
  kernels::pack_groups(m, aligned, 0, kernels::packed_groups(m.rows));
  Matrix packed = m;
  packed.packed = aligned;
  return packed;
}

std::vector<float> random_activations(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> x(size_t(n * cols));
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> extreme_activations(int64_t n, int64_t cols, std::mt19937& rng) {
  std::bernoulli_distribution coin(0.5);
  std::vector<float> x(size_t(n * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i < x.size() / 2 ? 1.5f : (coin(rng) ? 1.5f : -1.5f);
  return x;
}

void run_matmul(const Matrix& m, const std::vector<float>& x, int64_t r0, int64_t n, int64_t o_begin, int64_t o_end,
                std::vector<float>& y) {
  std::vector<uint8_t> storage(kernels::activation_bytes(m, n));
  const kernels::PreparedActivations p =
      kernels::prepare_activations(m, x.data() + r0 * m.cols, n, m.cols, storage.data());
  kernels::matmul(m, p, y.data() + r0 * m.rows, m.rows, o_begin, o_end);
}

std::vector<float> all_outputs(const Matrix& m, const std::vector<float>& x, int64_t n, int64_t max_batch) {
  std::vector<float> y(size_t(max_batch * m.rows), kUnwritten);
  run_matmul(m, x, 0, n, 0, m.rows, y);
  return y;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_equals_twin(const Matrix& m, const std::vector<float>& x, int64_t n, int64_t max_batch,
                        const std::string& what) {
  const kernels::Isa isa = kernels::active_isa();
  const std::vector<float> got = all_outputs(m, x, n, max_batch);
  kernels::set_active_isa(kernels::Isa::Ref);
  const std::vector<float> twin = all_outputs(m, x, n, max_batch);
  kernels::set_active_isa(isa);
  EXPECT_TRUE(same_bytes(got, twin)) << what << " batch " << n << " on " << kernels::isa_name(isa)
                                     << ": first output " << got[0] << " vs twin " << twin[0];
}

void expect_twin_rows(const Matrix& m, const std::vector<float>& x, int64_t n,
                      const std::function<void(int64_t r, const float* x_row, const float* y_row)>& expect_row) {
  const kernels::Isa isa = kernels::active_isa();
  kernels::set_active_isa(kernels::Isa::Ref);
  const std::vector<float> y = all_outputs(m, x, n, n);
  for (int64_t r = 0; r < n; ++r) expect_row(r, x.data() + r * m.cols, y.data() + r * m.rows);
  kernels::set_active_isa(isa);
}

void expect_batch_and_group_split_bitwise(const Matrix& m, const std::vector<float>& x, int64_t max_batch,
                                          std::initializer_list<int64_t> batches, const std::string& what) {
  const int64_t groups = kernels::packed_groups(m.rows);
  std::vector<float> whole(size_t(max_batch * m.rows));
  run_matmul(m, x, 0, max_batch, 0, m.rows, whole);
  for (int64_t batch : batches) {
    std::vector<float> pieces(whole.size(), kUnwritten);
    for (int64_t r0 = 0; r0 < max_batch; r0 += batch)
      for (int64_t g = 0; g < groups; ++g)  // one group a thread
        run_matmul(m, x, r0, std::min(batch, max_batch - r0), g * kernels::kPackRows,
                   std::min(m.rows, (g + 1) * kernels::kPackRows), pieces);
    EXPECT_TRUE(same_bytes(whole, pieces)) << what << " in batches of " << batch;
  }
}

void expect_writes_only_groups_1_and_2(const Matrix& m, const std::vector<float>& x, int64_t n,
                                       const std::string& what) {
  ASSERT_EQ(m.rows, 37) << what;
  constexpr int64_t kStride = 40;  // three columns past the matrix
  std::vector<uint8_t> storage(kernels::activation_bytes(m, n));
  const kernels::PreparedActivations p = kernels::prepare_activations(m, x.data(), n, m.cols, storage.data());
  std::vector<float> y(size_t(n * kStride), kUnwritten);
  kernels::matmul(m, p, y.data(), kStride, 16, 37);  // groups 1 and 2 (rows 16..36)
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < kStride; ++o)
      EXPECT_EQ(y[size_t(r * kStride + o)] != kUnwritten, o >= 16 && o < 37) << what << " row " << r << " out " << o;
}

}  // namespace glacier::testing
