// Checks shared by the packed GEMM tests (Q8_0/Q4_0, K-quant and F16/BF16 layouts): packing a matrix into
// an aligned copy, running matmul over an output range, the twin's outputs row by row, and the properties
// every packed kernel keeps (equal to the twin, unchanged by batch and group split, no writes past its groups).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace glacier::testing {

// Written into output buffers first, so an output a kernel should not touch can be told from one it wrote.
inline constexpr float kUnwritten = -12345.0f;

// m with a packed copy of all its groups, placed 64-byte aligned inside storage (over-allocated for that).
kernels::Matrix with_packed_copy(const kernels::Matrix& m, std::vector<uint8_t>& storage);

// n rows of cols activations, normal around 0 with sigma 1.5.
std::vector<float> random_activations(int64_t n, int64_t cols, std::mt19937& rng);

// n rows of cols activations at +-1.5, the first half of them (in memory order) +1.5 and the rest of
// random sign: every row's amax, so each quantizes to +-127, the extremes a kernel's products meet.
std::vector<float> extreme_activations(int64_t n, int64_t cols, std::mt19937& rng);

// y [n x m.rows] rows [r0, r0 + n) over outputs [o_begin, o_end), from activation rows [r0, r0 + n) of x,
// through the active kernels.
void run_matmul(const kernels::Matrix& m, const std::vector<float>& x, int64_t r0, int64_t n, int64_t o_begin,
                int64_t o_end, std::vector<float>& y);

// All outputs of the first n activation rows on the active ISA, in max_batch rows preset to kUnwritten.
std::vector<float> all_outputs(const kernels::Matrix& m, const std::vector<float>& x, int64_t n, int64_t max_batch);

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b);

// On the active ISA: the variant's outputs for the first n rows equal the scalar twin's bit for bit
// (the active ISA is put back afterwards).
void expect_equals_twin(const kernels::Matrix& m, const std::vector<float>& x, int64_t n, int64_t max_batch,
                        const std::string& what);

// The twin held to a test's own definition of its outputs: on the reference ISA, the first n activation
// rows of x through m, then expect_row(r, x_row, y_row) for each row r with its m.cols activations and its
// m.rows outputs, still on the reference ISA (the active ISA is put back afterwards).
void expect_twin_rows(const kernels::Matrix& m, const std::vector<float>& x, int64_t n,
                      const std::function<void(int64_t r, const float* x_row, const float* y_row)>& expect_row);

// All max_batch rows in one call against the same rows in batches of each size in `batches`, each batch
// run one 16-row group at a time (as threads split it): no bit differs.
void expect_batch_and_group_split_bitwise(const kernels::Matrix& m, const std::vector<float>& x, int64_t max_batch,
                                          std::initializer_list<int64_t> batches, const std::string& what);

// m has 37 rows; x holds n activation rows. matmul over outputs 16..36 (groups 1 and 2) into output rows
// of stride 40 writes exactly those outputs: the rows of group 0 and the three columns past the matrix
// stay untouched.
void expect_writes_only_groups_1_and_2(const kernels::Matrix& m, const std::vector<float>& x, int64_t n,
                                       const std::string& what);

}  // namespace glacier::testing
