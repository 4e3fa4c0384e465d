// MpiChannel: MPI_Isend/MPI_Irecv with a table of live requests. Waiting polls MPI_Test with a
// backoff (yield, then sleeps growing to 200 us): an oversubscribed rank must not busy-poll a core
// another rank computes on, and a 200 us ceiling costs little next to a micro-batch's compute.
// A stall watchdog and an injected send delay ride on a private duplicate of the world communicator.
#include "comm/mpi_channel.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>

#include "comm/message_tags.h"
#include "comm/startup_watchdog.h"
#include "comm/stop_relay.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::comm {
namespace {

// Watchdog messages travel on their own communicator, so their tags never meet the pipeline's.
constexpr int kTagPing = tags::kPing;
constexpr int kTagPong = tags::kPong;
// A pong: the ping's sequence number, the rank the answering rank waits for (-1: it is computing),
// and how long it has waited, in milliseconds.
struct Pong {
  int64_t seq = 0;
  int64_t waiting_on = -1;
  int64_t waited_ms = 0;
};

// progress() drives transfers and the watchdog at most this often while a rank computes: short next to
// a transfer's time and the watchdog's grace, long next to a small model's layer (0.1-0.5 ms).
constexpr double kComputeProgressIntervalS = 0.001;

// How long a live rank may take to answer a ping: it answers from its next wait or between two layers,
// so the slowest layer of a large micro-batch bounds it; a tenth of the stall timeout is ample for
// that and keeps detection quick (at least 1 s so scheduling noise on a busy node does not count).
double answer_grace(double stall_timeout_s) { return std::clamp(stall_timeout_s / 10.0, 1.0, 10.0); }

class MpiChannel final : public Channel {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiChannel(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
    MPI_Comm_dup(comm_, &watch_);
  }
  ~MpiChannel() override {
    for (auto& note : outbox_) MPI_Request_free(&note.req);  // small eager messages: they complete on their own
    MPI_Comm_free(&watch_);
    MPI_Comm_free(&node_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string host_name() const override {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<size_t>(len));
  }

  void configure_faults(const ChannelFaultSettings& settings) override {
    faults_ = settings;
    if (faults_.stall_timeout_s > 0) hosts_ = allgather_strings(host_name());
  }

  Request isend(const void* buf, size_t bytes, int dest, int tag) override {
    GLACIER_ASSERT(bytes <= static_cast<size_t>(INT32_MAX), "message under 2 GiB");
    Request r = slot(dest);
    if (faults_.send_delay_s > 0) {
      // Held back, not slept on: the sender goes on computing, as it would behind a slow link.
      delayed_.push_back({r.id, buf, bytes, dest, tag, now_seconds() + faults_.send_delay_s});
      held_[static_cast<size_t>(r.id)] = 1;
      return r;
    }
    MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, tag, comm_, &live_[static_cast<size_t>(r.id)]);
    return r;
  }
  Request irecv(void* buf, size_t capacity, int src, int tag) override {
    GLACIER_ASSERT(capacity <= static_cast<size_t>(INT32_MAX), "buffer under 2 GiB");
    Request r = slot(src);
    MPI_Irecv(buf, static_cast<int>(capacity), MPI_BYTE, src, tag, comm_, &live_[static_cast<size_t>(r.id)]);
    return r;
  }
  bool test(Request& r, size_t* received) override {
    GLACIER_ASSERT(r.active(), "test on an inactive request");
    service();
    if (held_[static_cast<size_t>(r.id)]) return false;
    int done = 0;
    MPI_Status st;
    MPI_Test(&live_[static_cast<size_t>(r.id)], &done, &st);
    if (!done) return false;
    if (received) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      *received = static_cast<size_t>(count);
    }
    release(r);
    return true;
  }
  void wait(Request& r, size_t* received) override {
    Backoff backoff(backoff::kMessage);
    const double started = now_seconds();
    double quiet_since = started;  // the watchdog's clock: restarted when a check finds every rank alive
    waiting_on_ = peer_[static_cast<size_t>(r.id)];
    wait_started_ = started;
    while (!test(r, received)) {
      backoff.pause();
      if (faults_.stall_timeout_s > 0 && backoff.pauses() % 256 == 0) watch(quiet_since);
      startup::tick();
    }
    waiting_on_ = -1;
    check_active_ = false;
  }
  void cancel(Request& r) override {
    if (!r.active()) return;
    MPI_Request& req = live_[static_cast<size_t>(r.id)];
    if (held_[static_cast<size_t>(r.id)]) {
      std::erase_if(delayed_, [&](const DelayedSend& d) { return d.id == r.id; });
    } else {
      MPI_Cancel(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    release(r);
  }
  void progress() override {
    post_due_sends();
    // Called between layers while computing. An MPI call that finds nothing to do yields the core under
    // mpi_yield_when_idle (set for oversubscribed and srun jobs), and with more ranks than cores another
    // rank takes it: a call a layer cost 170 us on 4 ranks x 2 cores, a quarter of a stage's compute.
    const double now = now_seconds();
    if (now - last_compute_progress_ < kComputeProgressIntervalS) return;
    last_compute_progress_ = now;
    serve_watchdog();
    relay_stop_requests();
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE);
  }
  std::optional<size_t> probe(int src, int tag) override {
    service();
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(src, tag, comm_, &flag, &st);
    if (!flag) return std::nullopt;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    return static_cast<size_t>(count);
  }
  std::unique_ptr<Channel> split(int color) override {
    // MPI_Comm_split blocks and cannot notice a stopped rank: meet first in a barrier that can.
    if (startup::active()) barrier();
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(comm_, color, rank_, &sub);
    auto channel = std::make_unique<MpiChannel>(sub);
    channel->configure_faults(faults_);
    return channel;
  }

  std::optional<std::string> agree_on_error(const std::optional<std::string>& local) override {
    int mine = local ? rank_ : size_;
    int first = size_;
    wait_collective([&](MPI_Request* req) { MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_, req); });
    if (first == size_) return std::nullopt;
    int64_t len = rank_ == first ? static_cast<int64_t>(local->size()) : 0;
    wait_collective([&](MPI_Request* req) { MPI_Ibcast(&len, 1, MPI_INT64_T, first, comm_, req); });
    std::string msg = rank_ == first ? *local : std::string(static_cast<size_t>(len), '\0');
    wait_collective([&](MPI_Request* req) { MPI_Ibcast(msg.data(), static_cast<int>(len), MPI_CHAR, first, comm_, req); });
    return msg;
  }
  std::vector<int64_t> allgather(int64_t value) override {
    std::vector<int64_t> all(static_cast<size_t>(size_));
    wait_collective([&](MPI_Request* req) { MPI_Iallgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm_, req); });
    return all;
  }
  std::vector<std::string> allgather_strings(const std::string& value) override {
    std::vector<int64_t> lens = allgather(static_cast<int64_t>(value.size()));
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    int total = 0;
    for (int i = 0; i < size_; ++i) {
      counts[i] = static_cast<int>(lens[i]);
      displs[i] = total;
      total += counts[i];
    }
    std::string all(static_cast<size_t>(total), '\0');
    wait_collective([&](MPI_Request* req) {
      MPI_Iallgatherv(value.data(), static_cast<int>(value.size()), MPI_CHAR, all.data(), counts.data(), displs.data(),
                      MPI_CHAR, comm_, req);
    });
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i) out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(counts[i])));
    return out;
  }
  void barrier() override {
    wait_collective([&](MPI_Request* req) { MPI_Ibarrier(comm_, req); });
  }

 private:
  struct DelayedSend {
    int64_t id;
    const void* buf;
    size_t bytes;
    int dest, tag;
    double due;
  };
  struct Note {  // a watchdog message in flight
    Pong body;
    MPI_Request req = MPI_REQUEST_NULL;
  };

  // Starts a nonblocking collective and waits for it sleeping, not spinning (a blocking collective would
  // spin an oversubscribed core), and serving the start-up watchdog, which a blocking call could not:
  // a peer stopped before the collective would hang this rank silently.
  template <typename Start>
  void wait_collective(Start start) {
    MPI_Request req;
    start(&req);
    int done = 0;
    Backoff backoff(backoff::kCollective);
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done) {
      startup::tick();
      relay_stop_requests();
      backoff.pause();
    }
  }

  Request slot(int peer) {
    Request r;
    if (!free_.empty()) {
      r.id = free_.back();
      free_.pop_back();
    } else {
      r.id = static_cast<int64_t>(live_.size());
      live_.push_back(MPI_REQUEST_NULL);
      peer_.push_back(-1);
      held_.push_back(0);
    }
    peer_[static_cast<size_t>(r.id)] = peer;
    return r;
  }
  void release(Request& r) {
    free_.push_back(r.id);
    r.id = -1;
  }

  // Work every test call does: post held sends that are due (in order, so a link stays FIFO), answer
  // the watchdog's pings, retire watchdog messages that have left, and pass on stop requests.
  // progress() does the same, the watchdog's part at most every kComputeProgressIntervalS.
  void service() {
    post_due_sends();
    serve_watchdog();
    relay_stop_requests();
  }

  void serve_watchdog() {
    if (faults_.stall_timeout_s <= 0) return;
    if (rank_ != 0) answer_pings();
    std::erase_if(outbox_, [](Note& n) {
      int done = 0;
      MPI_Test(&n.req, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
  }

  // Held sends whose delay has passed, in order.
  void post_due_sends() {
    const double now = delayed_.empty() ? 0.0 : now_seconds();
    while (!delayed_.empty() && delayed_.front().due <= now) {
      const DelayedSend d = delayed_.front();
      delayed_.pop_front();
      MPI_Isend(d.buf, static_cast<int>(d.bytes), MPI_BYTE, d.dest, d.tag, comm_,
                &live_[static_cast<size_t>(d.id)]);
      held_[static_cast<size_t>(d.id)] = 0;
    }
  }

  void post_note(int dest, int tag, const Pong& body) {
    outbox_.push_back({body, MPI_REQUEST_NULL});
    Note& n = outbox_.back();  // std::list: the buffer stays put until the send completes
    MPI_Isend(&n.body, sizeof(Pong), MPI_BYTE, dest, tag, watch_, &n.req);
  }

  void answer_pings() {
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(0, kTagPing, watch_, &flag, &st), flag) {
      Pong ping;
      MPI_Recv(&ping, sizeof(Pong), MPI_BYTE, 0, kTagPing, watch_, MPI_STATUS_IGNORE);
      last_ping_ = now_seconds();
      const int64_t waited_ms = waiting_on_ >= 0 ? static_cast<int64_t>((last_ping_ - wait_started_) * 1000) : 0;
      post_note(0, kTagPong, {ping.seq, waiting_on_, waited_ms});
    }
  }

  // Called from a wait that has not completed. Rank 0 checks every rank once nothing has completed
  // for the stall timeout; the others give up on their own only when rank 0 itself has gone quiet.
  void watch(double& quiet_since) {
    const double now = now_seconds();
    const double timeout = faults_.stall_timeout_s, grace = answer_grace(timeout);
    if (rank_ != 0) {
      if (now - std::max(quiet_since, last_ping_) >= 2 * timeout + grace)
        throw StallError(format("stall watchdog on rank %d (%s): waited %.0f s for rank %d, and rank 0 has not checked "
                                "on the ranks for %.0f s: rank 0 is stopped or hung",
                                rank_, host(rank_).c_str(), now - wait_started_, waiting_on_,
                                now - std::max(quiet_since, last_ping_)));
      return;
    }
    if (!check_active_) {
      if (now - quiet_since < timeout) return;
      ++check_seq_;
      check_active_ = true;
      check_started_ = now;
      answers_.assign(static_cast<size_t>(size_), std::nullopt);
      for (int r = 1; r < size_; ++r) post_note(r, kTagPing, {check_seq_, -1, 0});
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
      silent += format("rank %d (%s)", r, host(r).c_str());
    }
    throw StallError(format("stall watchdog: no transfer completed for %.0f s (--stall-timeout %.0f) and %s did not "
                            "answer within %.0f s: stopped or hung; the others: %s",
                            now - quiet_since, timeout, silent.c_str(), grace, describe_answers().c_str()));
  }

  void collect_pongs() {
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, kTagPong, watch_, &flag, &st), flag) {
      Pong pong;
      MPI_Recv(&pong, sizeof(Pong), MPI_BYTE, st.MPI_SOURCE, kTagPong, watch_, MPI_STATUS_IGNORE);
      if (pong.seq == check_seq_) answers_[static_cast<size_t>(st.MPI_SOURCE)] = pong;  // older answers are stale
    }
  }

  std::string describe_answers() const {
    std::string s;
    for (int r = 1; r < size_; ++r) {
      const auto& a = answers_[static_cast<size_t>(r)];
      if (!a) continue;
      if (!s.empty()) s += "; ";
      s += a->waiting_on < 0 ? format("rank %d computing", r)
                             : format("rank %d waiting %.1f s for rank %lld", r, a->waited_ms / 1000.0,
                                      static_cast<long long>(a->waiting_on));
    }
    return s.empty() ? "none" : s;
  }

  std::string host(int r) const { return r < static_cast<int>(hosts_.size()) ? hosts_[static_cast<size_t>(r)] : "?"; }

  template <typename... Args>
  static std::string format(const char* fmt, Args... args) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm watch_ = MPI_COMM_NULL;  // the watchdog's own messages
  std::vector<MPI_Request> live_;   // handles by Request::id (MPI keeps no pointer to these variables)
  std::vector<int> peer_;           // the other end of each request, for the watchdog's reports
  std::vector<char> held_;          // 1 while a send waits in delayed_ (its handle is not posted yet)
  std::vector<int64_t> free_;
  ChannelFaultSettings faults_;
  std::deque<DelayedSend> delayed_;
  std::list<Note> outbox_;
  std::vector<std::string> hosts_;
  // Watchdog state: what this rank waits for (answers pings), and rank 0's current liveness check.
  int waiting_on_ = -1;
  double wait_started_ = 0.0;
  double last_ping_ = 0.0;
  double last_compute_progress_ = 0.0;
  bool check_active_ = false;
  int64_t check_seq_ = 0;
  double check_started_ = 0.0;
  std::vector<std::optional<Pong>> answers_;
};

}  // namespace

std::unique_ptr<Channel> make_mpi_channel() {
  // The channel's own communicators come from blocking MPI calls: every rank must be there first.
  startup::sync("creating the communicators");
  return std::make_unique<MpiChannel>(MPI_COMM_WORLD);
}

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::_Exit(code); }

}  // namespace glacier::comm
