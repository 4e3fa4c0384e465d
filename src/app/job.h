// Runs one glacier_mpi job on this rank: load the model shard, run the prompts, write the outputs.
#pragma once
#include "app/options.h"

namespace glacier::app {

// Exit codes a job script can act on.
constexpr int kExitOk = 0;
constexpr int kExitInputError = 2;     // bad model, prompts or options: do not retry
constexpr int kExitInterrupted = 75;   // stopped by SIGTERM/SIGUSR1 after flushing: requeue with --resume

int run_job(const JobOptions& options);

}  // namespace glacier::app
