// In-process channels: one mutex-protected hub of mailboxes (one a (source, destination, tag) link),
// each with a FIFO of messages and a FIFO of posted receives that are matched in order.
#include "comm/inprocess_channel.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "comm/delayed_sends.h"
#include "util/clock.h"
#include "util/error.h"

namespace glacier::comm {

class InProcessHub {
 public:
  explicit InProcessHub(int n) : n_(n), gather_(static_cast<size_t>(n)), strings_(static_cast<size_t>(n)) {}

  struct PendingRecv {
    void* buf;
    size_t capacity;
    size_t received = 0;
    bool done = false;
  };
  using Link = std::tuple<int, int, int>;  // source, destination, tag
  struct Mailbox {
    std::deque<std::vector<uint8_t>> messages;
    std::deque<std::shared_ptr<PendingRecv>> receives;
  };

  std::mutex mu;
  std::condition_variable cv;
  std::map<Link, Mailbox> boxes;

  // Matches posted receives with waiting messages, oldest first. Called with mu held.
  static void match(Mailbox& box) {
    while (!box.messages.empty() && !box.receives.empty()) {
      auto& msg = box.messages.front();
      auto& rcv = box.receives.front();
      GLACIER_ASSERT(msg.size() <= rcv->capacity, "in-process message larger than the posted buffer");
      // An empty message may come with null pointers on both sides, which memcpy must not be given.
      if (!msg.empty()) std::memcpy(rcv->buf, msg.data(), msg.size());
      rcv->received = msg.size();
      rcv->done = true;
      box.messages.pop_front();
      box.receives.pop_front();
    }
  }

  // A reusable barrier for the collectives.
  void barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation_ != gen; });
    }
  }

  int n_;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<InProcessHub>> splits_;  // by (split number, color)
  std::vector<int64_t> gather_;
  std::vector<std::string> strings_;
  std::vector<std::optional<std::string>> errors_;

 private:
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

namespace {

class InProcessChannel final : public Channel {
 public:
  InProcessChannel(std::shared_ptr<InProcessHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->n_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return hub_->n_; }
  std::string host_name() const override { return "inprocess"; }

  Request isend(const void* buf, size_t bytes, int dest, int tag) override {
    if (send_delay_s_ > 0) {
      // Held back as MpiChannel holds it: the request stays open (the buffer in use) until it is posted.
      Request r;
      {
        std::lock_guard<std::mutex> lock(hub_->mu);
        r = add(nullptr);
      }
      delayed_.hold({r.id, buf, bytes, dest, tag, now_seconds() + send_delay_s_});
      return r;
    }
    std::lock_guard<std::mutex> lock(hub_->mu);
    post(buf, bytes, dest, tag);
    return add(nullptr);  // the data is copied: the send is complete
  }
  Request irecv(void* buf, size_t capacity, int src, int tag) override {
    auto rcv = std::make_shared<InProcessHub::PendingRecv>(InProcessHub::PendingRecv{buf, capacity});
    std::lock_guard<std::mutex> lock(hub_->mu);
    auto& box = hub_->boxes[{src, rank_, tag}];
    box.receives.push_back(rcv);
    InProcessHub::match(box);
    return add(std::move(rcv));
  }
  bool test(Request& r, size_t* received) override {
    GLACIER_ASSERT(r.active(), "test on an inactive request");
    post_due_sends();
    if (delayed_.holds(r.id)) return false;
    std::lock_guard<std::mutex> lock(hub_->mu);
    auto& rcv = live_[static_cast<size_t>(r.id)];
    if (rcv && !rcv->done) return false;
    if (received) *received = rcv ? rcv->received : 0;
    rcv.reset();
    free_.push_back(r.id);
    r.id = -1;
    return true;
  }
  void wait(Request& r, size_t* received) override {
    for (;;) {
      if (test(r, received)) return;
      std::unique_lock<std::mutex> lock(hub_->mu);
      hub_->cv.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
  void cancel(Request& r) override {
    if (!r.active()) return;
    delayed_.drop(r.id);
    std::lock_guard<std::mutex> lock(hub_->mu);
    auto& rcv = live_[static_cast<size_t>(r.id)];
    if (rcv)
      for (auto& [link, box] : hub_->boxes)
        for (auto it = box.receives.begin(); it != box.receives.end(); ++it)
          if (*it == rcv) {
            box.receives.erase(it);
            break;
          }
    rcv.reset();
    free_.push_back(r.id);
    r.id = -1;
  }
  void progress() override { post_due_sends(); }
  std::optional<size_t> probe(int src, int tag) override {
    post_due_sends();
    std::lock_guard<std::mutex> lock(hub_->mu);
    auto it = hub_->boxes.find({src, rank_, tag});
    if (it == hub_->boxes.end() || it->second.messages.empty()) return std::nullopt;
    return it->second.messages.front().size();
  }
  // Threads of one process stop and die together, so there is no stalled rank to find; an injected
  // send delay is honoured (a test's slow link changes the timing, never the messages or their order).
  void configure_faults(const ChannelFaultSettings& settings) override { send_delay_s_ = settings.send_delay_s; }

  std::optional<std::string> agree_on_error(const std::optional<std::string>& local) override {
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      if (hub_->errors_.empty()) hub_->errors_.resize(static_cast<size_t>(hub_->n_));
      hub_->errors_[rank_] = local;
    }
    hub_->barrier();
    std::optional<std::string> first;
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      for (const auto& e : hub_->errors_)
        if (e) {
          first = e;
          break;
        }
    }
    hub_->barrier();
    return first;
  }
  std::vector<int64_t> allgather(int64_t value) override {
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      hub_->gather_[rank_] = value;
    }
    hub_->barrier();
    std::vector<int64_t> all;
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      all = hub_->gather_;
    }
    hub_->barrier();
    return all;
  }
  std::vector<std::string> allgather_strings(const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      hub_->strings_[rank_] = value;
    }
    hub_->barrier();
    std::vector<std::string> all;
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      all = hub_->strings_;
    }
    hub_->barrier();
    return all;
  }
  void barrier() override { hub_->barrier(); }
  std::unique_ptr<Channel> split(int color) override {
    const std::vector<int64_t> colors = allgather(color);
    int sub_rank = 0, sub_size = 0;
    for (int r = 0; r < static_cast<int>(colors.size()); ++r) {
      if (colors[static_cast<size_t>(r)] != color) continue;
      if (r < rank_) ++sub_rank;
      ++sub_size;
    }
    std::shared_ptr<InProcessHub> sub;
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      auto& slot = hub_->splits_[{splits_made_, color}];
      if (!slot) slot = std::make_shared<InProcessHub>(sub_size);
      sub = slot;
    }
    ++splits_made_;  // every rank counts its splits alike: the key of the next one
    auto channel = std::make_unique<InProcessChannel>(std::move(sub), sub_rank);
    channel->send_delay_s_ = send_delay_s_;  // as MpiChannel's split keeps its settings
    return channel;
  }

 private:
  // Copies a message into its link's mailbox. Called with the hub's mutex held.
  void post(const void* buf, size_t bytes, int dest, int tag) {
    auto& box = hub_->boxes[{rank_, dest, tag}];
    const auto* p = static_cast<const uint8_t*>(buf);
    box.messages.emplace_back(p, p + bytes);
    InProcessHub::match(box);
    hub_->cv.notify_all();
  }
  // Held sends whose delay has passed, in order; their requests complete with the copy.
  void post_due_sends() {
    if (delayed_.empty()) return;
    std::lock_guard<std::mutex> lock(hub_->mu);
    delayed_.release_due(now_seconds(), [&](const HeldSend& d) { post(d.buf, d.bytes, d.dest, d.tag); });
  }
  Request add(std::shared_ptr<InProcessHub::PendingRecv> rcv) {
    Request r;
    if (!free_.empty()) {
      r.id = free_.back();
      free_.pop_back();
      live_[static_cast<size_t>(r.id)] = std::move(rcv);
    } else {
      r.id = static_cast<int64_t>(live_.size());
      live_.push_back(std::move(rcv));
    }
    return r;
  }
  std::shared_ptr<InProcessHub> hub_;
  int rank_;
  uint64_t splits_made_ = 0;
  std::vector<std::shared_ptr<InProcessHub::PendingRecv>> live_;  // nullptr: a completed send
  std::vector<int64_t> free_;
  double send_delay_s_ = 0.0;  // ChannelFaultSettings::send_delay_s
  DelayedSends delayed_;       // sends held back by it, not yet posted
};

}  // namespace

std::vector<std::unique_ptr<Channel>> make_inprocess_channels(int n_ranks) {
  auto hub = std::make_shared<InProcessHub>(n_ranks);
  std::vector<std::unique_ptr<Channel>> out;
  for (int r = 0; r < n_ranks; ++r) out.push_back(std::make_unique<InProcessChannel>(hub, r));
  return out;
}

}  // namespace glacier::comm
