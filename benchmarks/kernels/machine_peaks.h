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
};

// Every figure is the best of a few passes; the threads run the same loop at once.
MachinePeaks measure_machine_peaks(kernels::Isa tier, int threads);

}  // namespace glacier::bench
