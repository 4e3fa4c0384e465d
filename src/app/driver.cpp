// Driver: world rank 0 leads (replica 0's scheduler, the work queue for the others, the one writer of
// the results); every other replica's driver serves (asks for prompts, sends its rows back).
#include "app/driver.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "app/decode_group_tuning.h"
#include "app/job.h"
#include "app/progress.h"
#include "app/result_sink.h"
#include "app/signals.h"
#include "app/work_queue.h"
#include "pipeline/wire_integrity.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/log.h"

namespace glacier::app {
namespace {

// How many prompts a driver keeps queued beyond its busy slots: one per slot, so every slot that frees
// finds a prompt at once, while the rest of the file stays in the shared queue for the other replicas.
int32_t queue_room(const pipeline::SchedulerOptions& sopt, const pipeline::Scheduler& sched) {
  return sopt.n_slots - static_cast<int32_t>(sched.queued());
}

void idle_pause() { Backoff(backoff::kIdleDriver).pause(); }

// This replica's counts for /trace (summed over the replicas there).
io::TraceCounters job_counters(const pipeline::Scheduler& sched) {
  const pipeline::SpeculationCounts& sp = sched.speculation();
  return {sched.prompt_tokens_computed(), sched.prompt_tokens_reused(), sp.verifications, sp.drafted, sp.accepted,
          sp.emitted, sp.skipped_ring_full, sp.skipped_low_acceptance};
}

// --speculate's summary (this replica's share): how much drafting paid.
void print_speculation(const pipeline::SpeculationCounts& sp) {
  const double per_step = sp.verifications > 0 ? static_cast<double>(sp.emitted) / static_cast<double>(sp.verifications) : 0.0;
  const double rate = sp.drafted > 0 ? static_cast<double>(sp.accepted) / static_cast<double>(sp.drafted) : 0.0;
  std::printf("speculation: %lld verify steps, %lld tokens drafted, %lld accepted (%.1f%%), %.2f tokens per "
              "verification, %lld sequences decoded without (penalized), %lld steps without drafts as the "
              "decode groups were full, %lld for low acceptance\n",
              static_cast<long long>(sp.verifications), static_cast<long long>(sp.drafted),
              static_cast<long long>(sp.accepted), 100.0 * rate, per_step, static_cast<long long>(sp.plain_sequences),
              static_cast<long long>(sp.skipped_ring_full), static_cast<long long>(sp.skipped_low_acceptance));
  if (sp.plain_sequences > 0)
    GLACIER_LOG_WARN("--speculate: %lld sequences with repetition, frequency or presence penalties decoded "
                     "without drafts (a verify step would count drafts it then rejects in their penalties)",
                     static_cast<long long>(sp.plain_sequences));
}

// World rank 0's run: the driver of replica 0, the one queue of prompts for every replica and the
// writer of the results.
class Lead {
 public:
  Lead(const DriverSetup& s, PromptBook& book, const Provenance& provenance, const std::vector<int>& clients)
      : s_(s), book_(book), records_(book.records()), sink_(s.options, provenance, records_),
        finished_before_(open_sink()), progress_(static_cast<int64_t>(records_.size())) {
    already_ = std::count(finished_before_.begin(), finished_before_.end(), true);
    progress_.set_already_done(already_);
    std::deque<int32_t> queue;
    for (size_t i = 0; i < records_.size(); ++i) {
      if (finished_before_[i]) continue;
      if (!records_[i].ok) {
        emit({make_error_result(records_[i], records_[i].error)});
      } else {
        queue.push_back(static_cast<int32_t>(i));
      }
    }
    coord_.emplace(s.world, clients, std::move(queue));
    sched_.emplace(
        s.scheduler, s.ring, [this](const pipeline::SequenceOutcome& out) { return book_.ends(out); },
        [this](pipeline::SequenceOutcome&& out) { finished_here(std::move(out)); });
    retuner_ = planning::make_retuner(s.groups);
    if (retuner_) retune_between_waves(*sched_, *retuner_);
    sched_->set_drain_check([this] {
      if (tend()) return true;
      refill();
      return false;
    });
  }

  int run(io::TraceCounters& counters, PromptTally& tally) {
    const double t0 = now_seconds();
    try {
      while (!stopping_) {
        refill();
        if (sched_->queued() == 0 && coord_->queue_empty()) break;
        if (sched_->queued() > 0) {
          sched_->run();
        } else if (tend()) {  // nothing of ours to run (our share is taken): serve the others meanwhile
          break;
        } else {
          idle_pause();
        }
      }
      while (!coord_->clients_done()) {
        tend();
        idle_pause();
      }
    } catch (const comm::StallError&) {
      sink_.finish();  // a stalled rank ends the job by abort: save every result computed so far first
      throw;
    } catch (const pipeline::WireIntegrityError&) {
      // Every result so far passed its checksums: save them, and those the other replicas still send.
      wait_for_clients([this](io::ResultRecord&& r) { arrived(std::move(r)); });
      sink_.finish();
      throw;
    } catch (...) {
      // The other replicas must still learn that the job ends, or they would wait for work forever.
      wait_for_clients([](io::ResultRecord&&) {});
      throw;
    }
    const double seconds = now_seconds() - t0;
    if (retuner_) sink_.record_attribute("decode_groups", planning::with_retunes(s_.groups, retuner_->retunes(), retuner_->trials()).dump());
    sink_.finish();
    progress_.update(sink_.done(), tally_.generated_tokens);
    progress_.finish();
    print_summary(seconds);
    counters = job_counters(*sched_);
    tally = tally_;
    return outcome();
  }

 private:
  // Readies the outputs; returns, per prompt, whether an earlier run finished it (--resume).
  std::vector<bool> open_sink() {
    sink_.set_token_text([&tok = s_.tokenizer](int32_t id) { return tok.token_to_piece(id, true); });
    return s_.options.resume ? sink_.resume() : std::vector<bool>(records_.size(), false);
  }

  // One prompt's rows (one a sample). A prompt counts as failed when any of its samples failed; its
  // prompt tokens count once (its samples share one prefill).
  void emit(const std::vector<io::ResultRecord>& rows) {
    bool ok = true;
    for (const io::ResultRecord& r : rows) {
      if (r.status == "ok") {  // a failed row's tokens were never processed: they count in no rate
        if (r.sample == 0) tally_.prompt_tokens += static_cast<int64_t>(r.prompt_tokens.size());
        tally_.generated_tokens += r.score ? 0 : static_cast<int64_t>(r.tokens.size());
      } else {
        ok = false;
      }
      sink_.put(r);
    }
    ++(ok ? tally_.finished_ok : tally_.failed);
  }

  // A sequence of replica 0 finished.
  void finished_here(pipeline::SequenceOutcome&& out) {
    std::vector<io::ResultRecord> rows = book_.result(out);
    if (rows.empty()) return;  // more samples of the prompt to come
    coord_->own_result();
    emit(rows);
  }

  // Another replica's prompt: its rows arrive together, one at a time here.
  void arrived(io::ResultRecord&& r) {
    const int64_t index = r.index;
    std::vector<io::ResultRecord>& rows = remote_rows_[index];
    rows.push_back(std::move(r));
    if (rows.size() < sink_.rows_of(index)) return;
    emit(rows);
    remote_rows_.erase(index);
  }

  void refill() {
    for (int32_t i : coord_->take(queue_room(s_.scheduler, *sched_))) {
      std::vector<io::ResultRecord> err = book_.add(i, *sched_);
      if (!err.empty()) {
        coord_->own_result();
        emit(err);
      }
    }
  }

  // Between scheduling rounds: keeps the file and the progress line fresh, serves the other replicas,
  // and drains on SIGTERM. True once draining.
  bool tend() {
    sink_.tick();
    progress_.update(sink_.done(), tally_.generated_tokens);
    coord_->serve([this](io::ResultRecord&& r) { arrived(std::move(r)); });
    if (!stopping_ && stop_requested()) {
      stopping_ = true;
      GLACIER_LOG_WARN("%s: draining the job (finishing the prompts in flight, starting no new one)",
                       describe_stop().c_str());
      coord_->stop_handing_out();
    }
    return stopping_;
  }

  // After a fault here: hands out nothing more and waits until every other replica has ended.
  void wait_for_clients(const std::function<void(io::ResultRecord&&)>& on_result) {
    coord_->stop_handing_out();
    while (!coord_->clients_done()) {
      coord_->serve(on_result);
      idle_pause();
    }
  }

  void print_summary(double seconds) const {
    const int64_t total = static_cast<int64_t>(records_.size());
    // The summary line benchmarks read: fixed wording, keep it stable (benchmarks/scaling parse the failed
    // count, the seconds, both rates and the micro-batches). Finished and failed count this run's prompts,
    // left those without a result, earlier those a --resume found done.
    std::printf("done: %zu prompts (%lld failed), %lld finished, %lld left, %lld earlier, %lld prompt tokens, %lld "
                "generated tokens in %.3f s: %.1f prompt tok/s, %.1f generated tok/s, %lld micro-batches\n",
                records_.size(), static_cast<long long>(tally_.failed), static_cast<long long>(tally_.finished_ok),
                static_cast<long long>(total - sink_.done()), static_cast<long long>(already_),
                static_cast<long long>(tally_.prompt_tokens), static_cast<long long>(tally_.generated_tokens), seconds,
                tally_.prompt_tokens / seconds, tally_.generated_tokens / seconds,
                static_cast<long long>(sched_->micro_batches_sent()));
    // What the ring computed of the prompts (this replica's share): a prompt's n samples share one prefill,
    // and prompts take the rows of a prefix some slot holds (/trace@prompt_tokens_reused sums the replicas).
    std::printf("prefill: %lld prompt tokens computed, %lld taken from the prefix cache\n",
                static_cast<long long>(sched_->prompt_tokens_computed()),
                static_cast<long long>(sched_->prompt_tokens_reused()));
    if (s_.scheduler.draft_max > 0) print_speculation(sched_->speculation());
    if (retuner_) std::printf("decode groups: %zu re-tunes between waves\n", retuner_->retunes().size());
  }

  // The job's exit code once the results are saved.
  int outcome() const {
    const int64_t total = static_cast<int64_t>(records_.size());
    if (sink_.done() < total) {
      if (!stopping_)
        throw std::runtime_error("internal error: " + std::to_string(total - sink_.done()) + " prompts got no result");
      GLACIER_LOG_WARN("stopped by %s after %lld of %zu prompts; results are flushed: rerun with --resume to finish",
                       describe_stop().c_str(), static_cast<long long>(sink_.done()), records_.size());
      return kExitInterrupted;
    }
    const int64_t ran = total - already_;
    if (ran > 0 && tally_.failed == ran) {
      GLACIER_LOG_ERROR("every one of the %lld prompts failed (see their error rows): the model or the prompt file is at fault",
                        static_cast<long long>(ran));
      return kExitAllPromptsFailed;
    }
    return kExitOk;
  }

  const DriverSetup& s_;
  PromptBook& book_;
  const std::vector<io::PromptRecord>& records_;
  ResultSink sink_;
  std::vector<bool> finished_before_;  // by prompt: an earlier run's rows answer it (--resume)
  Progress progress_;
  int64_t already_ = 0;  // how many of them
  PromptTally tally_;
  std::optional<WorkCoordinator> coord_;
  std::optional<pipeline::Scheduler> sched_;
  std::optional<planning::DecodeGroupRetuner> retuner_;
  std::map<int64_t, std::vector<io::ResultRecord>> remote_rows_;
  bool stopping_ = false;
};

// The driver of replica k > 0: its prompts come from the coordinator and its rows go back there.
class Serve {
 public:
  Serve(const DriverSetup& s, PromptBook& book, int coordinator) : s_(s), book_(book), client_(s.world, coordinator) {
    sched_.emplace(
        s.scheduler, s.ring, [this](const pipeline::SequenceOutcome& out) { return book_.ends(out); },
        [this](pipeline::SequenceOutcome&& out) {
          std::vector<io::ResultRecord> rows = book_.result(out);
          if (!rows.empty()) client_.send_results(rows);
        });
    retuner_ = planning::make_retuner(s.groups);
    if (retuner_) retune_between_waves(*sched_, *retuner_);
    sched_->set_drain_check([this] {
      if (stop_requested()) stopping_ = true;
      if (stopping_) return true;
      feed(client_.poll(std::max(0, queue_room(s_.scheduler, *sched_))));
      return false;
    });
  }

  int run(io::TraceCounters& counters) {
    try {
      while (!stopping_) {
        if (sched_->queued() == 0) {
          const std::vector<int32_t> got = client_.wait(s_.scheduler.n_slots);
          if (got.empty()) break;
          feed(got);
        }
        if (sched_->queued() > 0) sched_->run();
      }
    } catch (const comm::StallError&) {
      throw;
    } catch (...) {
      client_.finish();
      throw;
    }
    client_.finish();
    counters = job_counters(*sched_);
    return stopping_ ? kExitInterrupted : kExitOk;
  }

 private:
  void feed(const std::vector<int32_t>& indices) {
    for (int32_t i : indices) {
      std::vector<io::ResultRecord> err = book_.add(i, *sched_);
      if (!err.empty()) client_.send_results(err);
    }
  }

  const DriverSetup& s_;
  PromptBook& book_;
  WorkClient client_;
  std::optional<pipeline::Scheduler> sched_;
  std::optional<planning::DecodeGroupRetuner> retuner_;
  bool stopping_ = false;
};

}  // namespace

Driver::Driver(const DriverSetup& setup) : s_(setup), book_(setup.options, setup.tokenizer, setup.chat) {}

int Driver::lead(const Provenance& provenance, const std::vector<int>& clients) {
  return Lead(s_, book_, provenance, clients).run(counters_, tally_);
}

int Driver::serve(int coordinator) { return Serve(s_, book_, coordinator).run(counters_); }

}  // namespace glacier::app
