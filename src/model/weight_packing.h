// Repacks a shard's Q8_0/Q4_0 matrices into the packed-GEMM layout (kernels/packed_gemm.h) once at load,
// and drops the mapped pages the copies replace, so the weights are held once.
#pragma once
#include "gguf/gguf_fwd.h"
#include "model/model_weights.h"

namespace glacier {
class ThreadPool;
}

namespace glacier::model {

// Packs every packable matrix of the shard (splitting the work over `pool`'s threads when given) and
// releases the file pages of the tensors that are now only read through their packed copies. The token
// embedding stays as it is: it is looked up row by row, never multiplied.
// `progress` (optional) hears the packed bytes after each matrix.
void pack_shard_weights(const gguf::File& file, ShardWeights& shard, ThreadPool* pool,
                        const LoadProgress& progress = {});

}  // namespace glacier::model
