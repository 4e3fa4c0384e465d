// Attention and SwiGLU kernels: every variant equals the scalar twin bit for bit (head sizes on and off
// the vector width, grouped heads, sliding windows, soft-capped scores), the twin agrees with float64 attention, exp_approx
// stays within its error bound, and the scratch bound of attention.h is respected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"

namespace glacier::kernels {
namespace {

// A KV head's cache for positions [0, n): keys and values in tiles (attention.h layout, one head).
struct Cache {
  int32_t n, hd;
  std::vector<float> keys, values;
  Cache(int32_t n_, int32_t hd_, std::mt19937& rng) : n(n_), hd(hd_) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int32_t n_tiles = (n + kKeyTile - 1) / kKeyTile;
    keys.assign(static_cast<size_t>(n_tiles) * tile_floats(1, hd), NAN);  // unwritten lanes: NaN
    values = keys;
    for (int32_t t = 0; t < n; ++t)
      for (int32_t d = 0; d < hd; ++d) {
        keys[at(t, d)] = dist(rng);
        values[at(t, d)] = dist(rng);
      }
  }
  size_t at(int32_t t, int32_t d) const { return static_cast<size_t>(t / kKeyTile) * tile_floats(1, hd) + d * kKeyTile + t % kKeyTile; }
  float key(int32_t t, int32_t d) const { return keys[at(t, d)]; }
  float value(int32_t t, int32_t d) const { return values[at(t, d)]; }
};

constexpr float kGuard = 1234.5f;  // fills the scratch past its documented size

std::vector<float> run(Isa isa, const Cache& c, const std::vector<float>& q, int32_t n_q, int32_t first, int32_t last,
                       float softcap = 0.0f) {
  set_active_isa(isa);
  const size_t scratch = attention_scratch_floats(n_q, last + 1);
  std::vector<float> scores(scratch + 64, kGuard), out(static_cast<size_t>(n_q) * c.hd, NAN);
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = c.hd;
  a.n_q = n_q;
  a.key_tiles = c.keys.data();
  a.value_tiles = c.values.data();
  a.tile_stride = tile_floats(1, c.hd);
  a.first = first;
  a.last = last;
  a.hd = c.hd;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  a.softcap = softcap;
  a.scores = scores.data();
  a.out = out.data();
  a.out_stride = c.hd;
  active_kernels().attend(a);
  for (size_t i = scratch; i < scores.size(); ++i) EXPECT_EQ(scores[i], kGuard) << "scratch overrun on " << isa_name(isa);
  return out;
}

struct AttnCase {
  int32_t hd, n_q, first, last;
};
const AttnCase kCases[] = {{64, 4, 0, 0},   {64, 4, 0, 37},  {64, 1, 5, 200}, {128, 8, 0, 130}, {8, 1, 0, 21},
                           {80, 2, 16, 47}, {16, 3, 31, 31}, {256, 2, 0, 17}, {96, 4, 3, 64},
                           {72, 3, 9, 70},  {36, 2, 0, 50},
                           // heads past the SIMD blocks of four and two, windows of several tile groups
                           {64, 7, 21, 300}, {64, 5, 0, 130}, {128, 6, 40, 95}, {8, 4, 3, 70}, {48, 1, 0, 79}};
// Score soft-caps: off, and one small enough (scores here are ~N(0, 1)) to bend most of them.
const float kSoftcaps[] = {0.0f, 1.5f};

TEST(Attention, EveryVariantEqualsTheReferenceTwinBitForBit) {
  std::mt19937 rng(401);
  for (const float softcap : kSoftcaps)
    for (const AttnCase& ac : kCases) {
      Cache c(ac.last + 1, ac.hd, rng);
      // Values before the window may be unwritten (a sliding window's slot reuse): NaN there must not leak.
      for (int32_t t = 0; t < ac.first; ++t)
        for (int32_t d = 0; d < ac.hd; ++d) c.values[c.at(t, d)] = NAN;
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> q(static_cast<size_t>(ac.n_q) * ac.hd);
      for (float& v : q) v = dist(rng);
      const auto want = run(Isa::Ref, c, q, ac.n_q, ac.first, ac.last, softcap);
      for (Isa isa : supported_isas()) {
        const auto got = run(isa, c, q, ac.n_q, ac.first, ac.last, softcap);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << isa_name(isa) << " hd " << ac.hd << " heads " << ac.n_q << " positions " << ac.first << ".." << ac.last
            << " softcap " << softcap;
      }
    }
  set_active_isa(supported_isas().back());
}

TEST(Attention, ReferenceAgreesWithFloat64Attention) {
  std::mt19937 rng(402);
  for (const float softcap : kSoftcaps)
  for (const AttnCase& ac : kCases) {
    const Cache c(ac.last + 1, ac.hd, rng);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(ac.n_q) * ac.hd);
    for (float& v : q) v = dist(rng);
    const auto got = run(Isa::Ref, c, q, ac.n_q, ac.first, ac.last, softcap);
    for (int32_t h = 0; h < ac.n_q; ++h) {
      std::vector<double> s;
      double m = -INFINITY;
      for (int32_t t = ac.first; t <= ac.last; ++t) {
        double dot = 0;
        for (int32_t d = 0; d < ac.hd; ++d) dot += double(q[h * ac.hd + d]) * c.key(t, d);
        const double scaled = dot / std::sqrt(double(ac.hd));
        s.push_back(softcap > 0 ? softcap * std::tanh(scaled / softcap) : scaled);
        m = std::max(m, s.back());
      }
      double sum = 0;
      for (double& v : s) sum += (v = std::exp(v - m));
      for (int32_t d = 0; d < ac.hd; ++d) {
        double o = 0, magnitude = 0;
        for (int32_t t = ac.first; t <= ac.last; ++t) {
          const double term = s[t - ac.first] / sum * c.value(t, d);
          o += term;
          magnitude += std::abs(term);
        }
        // Float sums over at most a few hundred terms and exp within 2 ulp: 1e-5 of the magnitude.
        EXPECT_NEAR(got[h * ac.hd + d], o, 1e-5 * magnitude + 1e-6) << "hd " << ac.hd << " head " << h << " d " << d;
      }
    }
  }
}

TEST(Attention, ExpApproxIsWithinTwoUlpOverTheSoftmaxRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(exp_approx(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2 * 0x1p-23) << "relative error " << worst;
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_GT(exp_approx(-1000.0f), 0.0f) << "clamped, not flushed";
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

TEST(Attention, SoftcapApproxIsWithinFourUlpOfTheCapFromTanh) {
  // The cancellation in 1 - 2 / (e + 1) near 0 costs about one ulp of 1, so the bound is in ulps of
  // the cap, not of the result; far out the clamp of exp_approx gives exactly +-cap.
  for (const float cap : {1.5f, 30.0f, 50.0f}) {
    const double ulp = std::nextafter(cap, 2 * cap) - cap;
    double worst = 0;
    for (float s = -12 * cap; s <= 12 * cap; s += cap / 997) {
      const double want = cap * std::tanh(double(s) / cap);
      worst = std::max(worst, std::abs(double(softcap_approx(s, cap, 1.0f / cap)) - want));
    }
    EXPECT_LE(worst, 4 * ulp) << "cap " << cap;
    EXPECT_EQ(softcap_approx(1e6f * cap, cap, 1.0f / cap), cap);
    EXPECT_EQ(softcap_approx(-1e6f * cap, cap, 1.0f / cap), -cap);
  }
}

TEST(Attention, SwigluVariantsAgreeBitwiseAndWithTheDefinition) {
  std::mt19937 rng(403);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  constexpr int64_t kN = 1000 + 7;  // a tail past every vector width
  std::vector<float> g(kN), u(kN);
  for (auto& v : g) v = dist(rng);
  for (auto& v : u) v = dist(rng);
  std::vector<float> want(kN);
  swiglu_ref(g.data(), u.data(), kN, want.data());
  for (int64_t i = 0; i < kN; ++i) {
    const double exact = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
    EXPECT_NEAR(want[i], exact, 4e-7 * std::abs(exact) + 1e-30) << g[i];
  }
  for (Isa isa : supported_isas()) {
    std::vector<float> got(kN);
    kernels_for(isa).swiglu(g.data(), u.data(), kN, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), kN * sizeof(float))) << isa_name(isa);
  }
}

TEST(Attention, SumExpVariantsAgreeBitwiseAndWithFloat64) {
  std::mt19937 rng(404);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 15, 16, 17, 32000, 32007}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = dist(rng);
    const float shift = *std::max_element(x.begin(), x.end());
    const double want = sum_exp_ref(x.data(), n, shift);
    double exact = 0;
    for (float v : x) exact += std::exp(double(v) - shift);
    EXPECT_NEAR(want, exact, 2e-7 * exact) << n;  // exp within 2 ulp, float chunk sums of 16
    for (Isa isa : supported_isas()) EXPECT_EQ(kernels_for(isa).sum_exp(x.data(), n, shift), want) << isa_name(isa) << " n " << n;
  }
}

}  // namespace
}  // namespace glacier::kernels
