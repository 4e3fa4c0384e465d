// Transformer element-wise ops against float64 computations of their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace glacier::kernels {
namespace {

// Float evaluation of a few roundings (a sum of n <= 4096 squares in 8 partial sums, a sqrt, two
// products; or expf/division) against float64: a few hundred float ulps at most.
constexpr double kRel = 2e-5;
constexpr double kAbs = 1e-7;  // for results near zero, where relative error means nothing

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = d(rng);
  return v;
}

void expect_near_rel(float got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, kAbs + kRel * std::fabs(want)) << what;
}

TEST(Ops, RmsnormMatchesDefinition) {
  std::mt19937 rng(301);
  for (int64_t n : {1, 7, 64, 4096}) {
    const auto x = random_floats(rng, n, -3, 3), w = random_floats(rng, n, 0.5f, 1.5f);
    std::vector<float> out(static_cast<size_t>(n));
    rmsnorm(x.data(), w.data(), n, 1e-5f, out.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / double(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) expect_near_rel(out[size_t(i)], x[size_t(i)] * inv * w[size_t(i)], "rmsnorm n=" + std::to_string(n));
    std::vector<float> in_place = x;
    rmsnorm(in_place.data(), w.data(), n, 1e-5f, in_place.data());
    EXPECT_EQ(in_place, out) << "in-place rmsnorm differs";
  }
}

TEST(Ops, SoftmaxMatchesDefinitionAndSumsToOne) {
  std::mt19937 rng(302);
  for (int64_t n : {1, 5, 100, 2048}) {
    auto x = random_floats(rng, n, -20, 20);
    const auto orig = x;
    softmax(x.data(), n);
    double mx = orig[0];
    for (float v : orig) mx = std::max(mx, double(v));
    double sum = 0;
    for (float v : orig) sum += std::exp(double(v) - mx);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      expect_near_rel(x[size_t(i)], std::exp(double(orig[size_t(i)]) - mx) / sum, "softmax");
      total += x[size_t(i)];
    }
    EXPECT_NEAR(total, 1.0, 1e-4) << "softmax n=" << n;
  }
  std::vector<float> big = {1000.0f, 1000.0f};  // max subtraction keeps large logits finite
  softmax(big.data(), 2);
  EXPECT_EQ(big[0], 0.5f);
}

TEST(Ops, SiluAndSwigluMatchDefinition) {
  std::mt19937 rng(303);
  const auto g = random_floats(rng, 257, -10, 10), u = random_floats(rng, 257, -2, 2);
  std::vector<float> out(g.size());
  swiglu(g.data(), u.data(), int64_t(g.size()), out.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = double(g[i]) / (1.0 + std::exp(-double(g[i])));
    expect_near_rel(silu(g[i]), s, "silu");
    expect_near_rel(out[i], s * u[i], "swiglu");
  }
  EXPECT_EQ(silu(0.0f), 0.0f);
}

TEST(Ops, AddAxpyScaleAreSingleRoundings) {
  std::mt19937 rng(304);
  const auto a = random_floats(rng, 100, -5, 5), b = random_floats(rng, 100, -5, 5);
  std::vector<float> out(100), y = b, s = a;
  add(a.data(), b.data(), 100, out.data());
  axpy(0.25f, a.data(), 100, y.data());
  scale(3.0f, 100, s.data());
  for (size_t i = 0; i < 100; ++i) {
    // Each result is the correctly rounded float of the exact double value.
    EXPECT_EQ(out[i], float(double(a[i]) + double(b[i])));
    EXPECT_EQ(y[i], float(double(b[i]) + 0.25 * double(a[i])));  // 0.25 * a is exact
    EXPECT_EQ(s[i], float(3.0 * double(a[i])));
  }
}

TEST(Ops, DotF32UsesActiveVariant) {
  std::mt19937 rng(305);
  const auto a = random_floats(rng, 1000, -1, 1), b = random_floats(rng, 1000, -1, 1);
  double exact = 0, magnitude = 0;
  for (size_t i = 0; i < a.size(); ++i) exact += double(a[i]) * b[i], magnitude += std::fabs(double(a[i]) * b[i]);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    // Float sum of 1000 terms: within 1000 * eps * sum|t| = 6e-5 sum|t| in the worst case.
    EXPECT_NEAR(dot_f32(a.data(), b.data(), 1000), exact, 6e-5 * magnitude) << isa_name(isa);
    EXPECT_EQ(dot_f32(a.data(), b.data(), 1000), kernels_for(isa).f32_f32(a.data(), b.data(), 1000));
  }
}

}  // namespace
}  // namespace glacier::kernels
