// The loop of every pipeline rank but the driver: receive a micro-batch from the previous stage, run
// this rank's layers, and pass the activations on (or, on the last stage, the sampled tokens and
// scores back to the driver), until the shutdown message arrives.
#pragma once
#include "comm/channel.h"
#include "compute/compute_throttle.h"
#include "compute/transformer_stage.h"
#include "pipeline/trace.h"
#include "pipeline/wire.h"
#include "pipeline/wire_integrity.h"

namespace glacier::pipeline {

// Returns the number of micro-batches processed. `throttle` slows this rank's compute (--slow-rank).
// A message that fails its checksum is not computed on: its report (logged here, naming the link and
// the micro-batch) travels on to the driver in its place, as does a report from an earlier stage.
int64_t run_stage_loop(comm::Channel& ch, compute::TransformerStage& stage, int stage_index, int n_stages,
                       WireCodec codec, TraceLog& trace, const compute::ComputeThrottle& throttle = compute::ComputeThrottle(),
                       const WireIntegrity& integrity = WireIntegrity());

}  // namespace glacier::pipeline
