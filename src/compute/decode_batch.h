// The micro-batch a decode step is timed with, at start-up (--decode-groups auto) and in benchmarks: one
// token for each of `rows` sequences, a KV slot each.
#pragma once
#include <cstddef>
#include <cstdint>

#include "compute/microbatch.h"

namespace glacier::compute {

// Row i is sequence i in slot i at position 0; every token is `token`, none has a target, and each asks
// the last stage for `output`.
inline MicroBatch one_token_rows(int32_t rows, int32_t token, OutputKind output) {
  MicroBatch mb;
  for (int32_t i = 0; i < rows; ++i) {
    Chunk c;
    c.seq = i;
    c.slot = i;
    c.n_tokens = 1;
    c.token_offset = i;
    c.output = output;
    mb.chunks.push_back(c);
  }
  mb.tokens.assign(static_cast<size_t>(rows), token);
  mb.targets.assign(static_cast<size_t>(rows), -1);
  return mb;
}

}  // namespace glacier::compute
