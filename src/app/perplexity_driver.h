// Rank 0's part of a --mode perplexity job: the text file's chunks through the ring, the running values as
// they complete in order, and the figures to --jsonl and --out (llama-perplexity's wording).
#pragma once
#include "app/options.h"
#include "app/provenance.h"
#include "model/tokenizer.h"
#include "pipeline/ring.h"
#include "pipeline/scheduler.h"

namespace glacier::app {

// Returns kExitOk; throws InputError naming the prompt file when a chunk failed or an output when it
// cannot be written.
int drive_perplexity(const JobOptions& o, const model::Tokenizer& tok, pipeline::Ring& ring,
                     const pipeline::SchedulerOptions& sopt, const Provenance& provenance);

}  // namespace glacier::app
