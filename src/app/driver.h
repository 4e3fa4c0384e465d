// The prompts of a generate or score job on each replica's driving rank: the prompt book, the shared
// work queue (world rank 0 deals prompt indices to every replica), results routed to the one writer on
// world rank 0, and draining on a stop request or a fault. Runs over any comm::Channel.
#pragma once
#include <cstdint>
#include <vector>

#include "app/options.h"
#include "app/prompt_book.h"
#include "app/provenance.h"
#include "app/requests.h"
#include "comm/channel.h"
#include "io/result_record.h"
#include "model/tokenizer.h"
#include "pipeline/ring.h"
#include "pipeline/scheduler.h"
#include "planning/decode_group_plan.h"

namespace glacier::app {

// What a replica's driver works with; every reference must outlive the Driver.
struct DriverSetup {
  const JobOptions& options;
  const model::Tokenizer& tokenizer;
  const ChatSetup& chat;
  pipeline::Ring& ring;  // this replica's pipeline
  const pipeline::SchedulerOptions& scheduler;
  comm::Channel& world;  // the replicas' drivers meet here (the work queue and the results)
  const planning::DecodeGroupPlan& groups;  // re-tuned between waves when the plan says so
};

// What the leading driver counted of this run's prompts (the summary line's figures). A prompt fails when
// any of its rows is an error; its prompt tokens count once (its samples share one prefill), and only the
// tokens of rows that finished ok count.
struct PromptTally {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t finished_ok = 0, failed = 0;
};

// One replica driver's run: call lead() or serve(), once.
class Driver {
 public:
  // Reads the prompt file (throws InputError when it cannot).
  explicit Driver(const DriverSetup& setup);

  // World rank 0: drives replica 0, deals the prompts to itself and to the other replicas' drivers
  // (`clients`: their world ranks), writes every result to the outputs in input order and prints the
  // summary. Returns kExitOk, kExitInterrupted after a drained stop request, or kExitAllPromptsFailed.
  // On a fault it saves what it can (the other replicas' results too, when they are sound) and rethrows.
  int lead(const Provenance& provenance, const std::vector<int>& clients);
  // The driver of replica k > 0: runs the prompts `coordinator` (a world rank) hands out and sends their
  // rows back. Returns kExitOk, or kExitInterrupted after a stop request.
  int serve(int coordinator);

  // This replica's counts for /trace, once lead() or serve() returned.
  const io::TraceCounters& counters() const { return counters_; }
  // The whole job's prompts, once lead() returned.
  const PromptTally& tally() const { return tally_; }

 private:
  DriverSetup s_;
  PromptBook book_;
  io::TraceCounters counters_;
  PromptTally tally_;
};

}  // namespace glacier::app
