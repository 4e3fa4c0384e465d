// The stall watchdog (stall_watchdog.h): rank 0's liveness checks, every rank's answers, and the reports
// that name a stopped or hung rank and what the others were waiting for.
#include "comm/stall_watchdog.h"

#include <algorithm>
#include <cstdio>

#include "comm/channel.h"
#include "comm/message_tags.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/text_format.h"

namespace glacier::comm {
namespace {

// How long a live rank may take to answer a ping: it answers from its next wait or between two layers,
// so the slowest layer of a large micro-batch bounds it; a tenth of the stall timeout is ample for
// that and keeps detection quick (at least 1 s so scheduling noise on a busy node does not count).
double answer_grace(double stall_timeout_s) { return std::clamp(stall_timeout_s / 10.0, 1.0, 10.0); }

}  // namespace

StallWatchdog::StallWatchdog(MPI_Comm comm) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

StallWatchdog::~StallWatchdog() {
  for (auto& note : outbox_) MPI_Request_free(&note.req);  // small eager messages: they complete on their own
  MPI_Comm_free(&comm_);
}

void StallWatchdog::arm(double stall_timeout_s, std::vector<std::string> hosts) {
  timeout_s_ = stall_timeout_s;
  hosts_ = std::move(hosts);
}

void StallWatchdog::serve() {
  if (!armed()) return;
  if (rank_ != 0) answer_pings();
  std::erase_if(outbox_, [](Note& n) {
    int done = 0;
    MPI_Test(&n.req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

void StallWatchdog::begin_wait(int peer, double now) {
  waiting_on_ = peer;
  wait_started_ = now;
}

void StallWatchdog::end_wait() {
  waiting_on_ = -1;
  check_active_ = false;
}

void StallWatchdog::post_note(int dest, int tag, const Pong& body) {
  outbox_.push_back({body, MPI_REQUEST_NULL});
  Note& n = outbox_.back();
  MPI_Isend(&n.body, sizeof(Pong), MPI_BYTE, dest, tag, comm_, &n.req);
}

void StallWatchdog::answer_pings() {
  int flag = 0;
  MPI_Status st;
  while (MPI_Iprobe(0, tags::kPing, comm_, &flag, &st), flag) {
    Pong ping;
    MPI_Recv(&ping, sizeof(Pong), MPI_BYTE, 0, tags::kPing, comm_, MPI_STATUS_IGNORE);
    last_ping_ = now_seconds();
    const int64_t waited_ms = waiting_on_ >= 0 ? static_cast<int64_t>((last_ping_ - wait_started_) * 1000) : 0;
    post_note(0, tags::kPong, {ping.seq, waiting_on_, waited_ms});
  }
}

// Rank 0 checks every rank once nothing has completed for the stall timeout; the others give up on their
// own only when rank 0 itself has gone quiet.
void StallWatchdog::check(double& quiet_since) {
  const double now = now_seconds();
  const double grace = answer_grace(timeout_s_);
  if (rank_ != 0) {
    if (now - std::max(quiet_since, last_ping_) >= 2 * timeout_s_ + grace)
      throw StallError(format_line("stall watchdog on rank %d (%s): waited %.0f s for rank %d, and rank 0 has not "
                                   "checked on the ranks for %.0f s: rank 0 is stopped or hung",
                                   rank_, host(rank_).c_str(), now - wait_started_, waiting_on_,
                                   now - std::max(quiet_since, last_ping_)));
    return;
  }
  if (!check_active_) {
    if (now - quiet_since < timeout_s_) return;
    ++check_seq_;
    check_active_ = true;
    check_started_ = now;
    answers_.assign(static_cast<size_t>(size_), std::nullopt);
    for (int r = 1; r < size_; ++r) post_note(r, tags::kPing, {check_seq_, -1, 0});
  }
  collect_pongs();
  const bool all_answered =
      std::all_of(answers_.begin() + 1, answers_.end(), [](const std::optional<Pong>& a) { return a.has_value(); });
  if (all_answered) {
    GLACIER_LOG_WARN("no transfer completed for %.0f s (--stall-timeout), but every rank answers: %s",
                     now - quiet_since, describe_answers().c_str());
    check_active_ = false;
    quiet_since = now;
    return;
  }
  if (now - check_started_ < grace) return;
  std::string silent;
  for (int r = 1; r < size_; ++r) {
    if (answers_[static_cast<size_t>(r)]) continue;
    if (!silent.empty()) silent += ", ";
    silent += format_line("rank %d (%s)", r, host(r).c_str());
  }
  throw StallError(format_line("stall watchdog: no transfer completed for %.0f s (--stall-timeout %.0f) and %s did "
                               "not answer within %.0f s: stopped or hung; the others: %s",
                               now - quiet_since, timeout_s_, silent.c_str(), grace, describe_answers().c_str()));
}

void StallWatchdog::collect_pongs() {
  int flag = 0;
  MPI_Status st;
  while (MPI_Iprobe(MPI_ANY_SOURCE, tags::kPong, comm_, &flag, &st), flag) {
    Pong pong;
    MPI_Recv(&pong, sizeof(Pong), MPI_BYTE, st.MPI_SOURCE, tags::kPong, comm_, MPI_STATUS_IGNORE);
    if (pong.seq == check_seq_) answers_[static_cast<size_t>(st.MPI_SOURCE)] = pong;  // older answers are stale
  }
}

std::string StallWatchdog::describe_answers() const {
  std::string s;
  for (int r = 1; r < size_; ++r) {
    const auto& a = answers_[static_cast<size_t>(r)];
    if (!a) continue;
    if (!s.empty()) s += "; ";
    s += a->waiting_on < 0 ? format_line("rank %d computing", r)
                           : format_line("rank %d waiting %.1f s for rank %lld", r, a->waited_ms / 1000.0,
                                         static_cast<long long>(a->waiting_on));
  }
  return s.empty() ? "none" : s;
}

std::string StallWatchdog::host(int r) const {
  return r < static_cast<int>(hosts_.size()) ? hosts_[static_cast<size_t>(r)] : "?";
}

}  // namespace glacier::comm
