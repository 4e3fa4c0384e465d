// The machine's ceilings for a kernel tier, measured now on `threads` threads at once: read bandwidth,
// fp32 FMA and the int8 multiply-add instructions that tier's kernels may use. Benchmarks quote their
// figures as fractions of these, measured in the same run.
#pragma once
#include <string>

#include "kernels/dispatch.h"

namespace glacier::bench {

struct MachinePeaks {
  double read_bytes_per_s = 0;  // streaming a buffer far larger than the caches
  double f32_flops_per_s = 0;   // FMA at the tier's vector width
  double int8_ops_per_s = 0;    // byte products x 2 (multiply and add), with `int8_instructions`
  std::string int8_instructions;
  // Signed x signed byte products (Q8_0 weights against Q8 activations). With VNNI the kernels store the
  // weights + 128 and correct once a block, so this equals int8_ops_per_s; without, every vpmaddubsw
  // needs the sign trick first, and this is that loop's rate.
  double signed_int8_ops_per_s = 0;
  std::string signed_int8_instructions;
};

// Every figure is the best of a few passes; the threads run the same loop at once.
MachinePeaks measure_machine_peaks(kernels::Isa tier, int threads);

}  // namespace glacier::bench
