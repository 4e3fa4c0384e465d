// Where the driver sends micro-batches: the stages of one pipeline, ending in results coming back.
// A local ring computes in this process (one rank, and the unit tests); the MPI ring streams
// micro-batches through the ranks.
#pragma once
#include "compute/microbatch.h"

namespace glacier::pipeline {
class TraceLog;
}

namespace glacier::pipeline {

class Ring {
 public:
  virtual ~Ring() = default;
  virtual int n_stages() const = 0;
  // Hands a micro-batch to the first stage; returns once its buffers may be reused.
  virtual void submit(const compute::MicroBatch& mb) = 0;
  // Takes the next finished micro-batch's result; with wait=false returns false when none is ready.
  virtual bool poll(compute::MicroBatchResult& out, bool wait) = 0;
  // The timeline the ring records its intervals into (none: nullptr); the driver adds its own there.
  virtual TraceLog* trace() { return nullptr; }
};

}  // namespace glacier::pipeline
