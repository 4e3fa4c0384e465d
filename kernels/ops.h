// Element-wise and row operations of the transformer besides the matrix products. Plain portable
// code with one fixed evaluation order (no ISA variants), so results do not depend on the CPU.
#pragma once
#include <cstdint>

namespace glacier::kernels {

// out = x * weight / sqrt(mean(x^2) + eps); the sum of squares is a float sum in a fixed order.
// out may alias x.
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// In place: x = exp(x - max) / sum. n >= 1.
void softmax(float* x, int64_t n);

// x / (1 + exp(-x)).
float silu(float x);

// out = silu(gate) * up, element-wise, with exp_approx.h's exp on the active variant (the same floats on
// every variant); out may alias gate or up.
void swiglu(const float* gate, const float* up, int64_t n, float* out);

void add(const float* a, const float* b, int64_t n, float* out);  // out = a + b
void axpy(float alpha, const float* x, int64_t n, float* y);      // y += alpha * x
void scale(float s, int64_t n, float* x);                          // x *= s

// Dot product of two f32 rows through the active variant (DotKernels::f32_f32).
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace glacier::kernels
