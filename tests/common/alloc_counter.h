// Counts calls to the global operator new in the test binaries that use it (the replacement lives in
// alloc_counter.cpp, which the linker pulls in only where allocation_count() is called), and a ring
// wrapper that records the count at every micro-batch so a test can see each scheduling round.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/ring.h"

namespace glacier::testing {

int64_t allocation_count();

class CountingRing : public pipeline::Ring {
 public:
  explicit CountingRing(pipeline::Ring& inner) : inner_(inner) { counts.reserve(4096); }
  int n_stages() const override { return inner_.n_stages(); }
  void submit(const compute::MicroBatch& mb) override {
    counts.push_back(allocation_count());
    inner_.submit(mb);
  }
  bool poll(compute::MicroBatchResult& out, bool wait) override { return inner_.poll(out, wait); }
  std::vector<int64_t> counts;  // allocation count at each submit

 private:
  pipeline::Ring& inner_;
};

}  // namespace glacier::testing
