// Runs one glacier_mpi job on this rank: load the model shard, run the prompts, write the outputs.
#pragma once
#include "app/options.h"
#include "comm/channel.h"

#include <stdexcept>
#include <string>

namespace glacier::app {

constexpr const char* kVersion = "0.1.0";

// Exit codes a job script can act on.
constexpr int kExitOk = 0;
constexpr int kExitInputError = 2;     // bad model, prompts or options: do not retry
constexpr int kExitFailure = 1;        // a fault while running (I/O error, ...): flushed results are kept
constexpr int kExitAllPromptsFailed = 3;  // the job ran, but every prompt it ran ended as an error row
constexpr int kExitInterrupted = 75;   // stopped by SIGTERM/SIGUSR1 after flushing: requeue with --resume

// Runs the job on this rank; every rank of the world calls it. Throws InputError (the same message on
// every rank) for a bad model, prompt file or option found before the ring starts.
// Thrown on every rank when rank 0 failed while driving the ring: rank 0 already has the message; the
// others exit with the same code instead of waiting for work that will never come.
class JobFailed : public std::runtime_error {
 public:
  JobFailed(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

int run_job(const JobOptions& options, comm::Channel& channel);

}  // namespace glacier::app
