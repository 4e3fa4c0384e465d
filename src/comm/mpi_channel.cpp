// MpiChannel: MPI_Isend/MPI_Irecv with a table of live requests. Waiting polls MPI_Test with a
// backoff (yield, then sleeps growing to 200 us): an oversubscribed rank must not busy-poll a core
// another rank computes on, and a 200 us ceiling costs little next to a micro-batch's compute.
// The stall watchdog (stall_watchdog.h) and injected send delays (delayed_sends.h) are its helpers.
#include "comm/mpi_channel.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "comm/delayed_sends.h"
#include "comm/stall_watchdog.h"
#include "comm/startup_watchdog.h"
#include "comm/stop_relay.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::comm {
namespace {

// progress() drives transfers and the watchdog at most this often while a rank computes: short next to
// a transfer's time and the watchdog's grace, long next to a small model's layer (0.1-0.5 ms).
constexpr double kComputeProgressIntervalS = 0.001;

class MpiChannel final : public Channel {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiChannel(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
    watchdog_ = std::make_unique<StallWatchdog>(comm_);
  }
  ~MpiChannel() override {
    watchdog_.reset();
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
    if (faults_.stall_timeout_s > 0) watchdog_->arm(faults_.stall_timeout_s, allgather_strings(host_name()));
  }

  Request isend(const void* buf, size_t bytes, int dest, int tag) override {
    GLACIER_ASSERT(bytes <= static_cast<size_t>(INT32_MAX), "message under 2 GiB");
    Request r = slot(dest);
    if (faults_.send_delay_s > 0) {
      // Held back, not slept on: the sender goes on computing, as it would behind a slow link.
      delayed_.hold({r.id, buf, bytes, dest, tag, now_seconds() + faults_.send_delay_s});
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
    if (delayed_.holds(r.id)) return false;
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
    watchdog_->begin_wait(peer_[static_cast<size_t>(r.id)], started);
    while (!test(r, received)) {
      backoff.pause();
      if (watchdog_->armed() && backoff.pauses() % 256 == 0) watchdog_->check(quiet_since);
      startup::tick();
    }
    watchdog_->end_wait();
  }
  void cancel(Request& r) override {
    if (!r.active()) return;
    MPI_Request& req = live_[static_cast<size_t>(r.id)];
    if (!delayed_.drop(r.id)) {
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
    watchdog_->serve();
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
    watchdog_->serve();
    relay_stop_requests();
  }

  // Held sends whose delay has passed, in order.
  void post_due_sends() {
    if (delayed_.empty()) return;
    delayed_.release_due(now_seconds(), [&](const HeldSend& d) {
      MPI_Isend(d.buf, static_cast<int>(d.bytes), MPI_BYTE, d.dest, d.tag, comm_, &live_[static_cast<size_t>(d.id)]);
    });
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  std::vector<MPI_Request> live_;  // handles by Request::id (MPI keeps no pointer to these variables)
  std::vector<int> peer_;          // the other end of each request, for the watchdog's reports
  std::vector<int64_t> free_;
  ChannelFaultSettings faults_;
  DelayedSends delayed_;  // sends held back by an injected link delay, not yet posted
  std::unique_ptr<StallWatchdog> watchdog_;
  double last_compute_progress_ = 0.0;
};

}  // namespace

std::unique_ptr<Channel> make_mpi_channel() {
  // The channel's own communicators come from blocking MPI calls: every rank must be there first.
  startup::sync("creating the communicators");
  return std::make_unique<MpiChannel>(MPI_COMM_WORLD);
}

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::_Exit(code); }

}  // namespace glacier::comm
