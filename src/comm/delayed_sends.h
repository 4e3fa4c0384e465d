// Sends held back by an injected link delay (ChannelFaultSettings::send_delay_s): kept in the order they
// were asked for and handed back once due, so a delayed link stays first-in first-out. No MPI here: the
// channel posts what release_due() hands it, and the queue is testable on its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace glacier::comm {

// One send as the caller asked for it, and when it may leave.
struct HeldSend {
  int64_t id;  // the channel's Request::id
  const void* buf;
  size_t bytes;
  int dest, tag;
  double due;  // seconds on util/clock.h's now_seconds()
};

class DelayedSends {
 public:
  // Delays are one constant per channel, so sends become due in the order they are held.
  void hold(const HeldSend& send) {
    const auto at = static_cast<size_t>(send.id);
    if (held_.size() <= at) held_.resize(at + 1, 0);
    held_[at] = 1;
    queue_.push_back(send);
  }
  // True while request `id` waits here (its transfer has not been posted).
  bool holds(int64_t id) const {
    const auto at = static_cast<size_t>(id);
    return id >= 0 && at < held_.size() && held_[at] != 0;
  }
  // Calls post(send) for every held send due at `now`, oldest first; a send not yet due keeps every
  // later one waiting behind it, as a link would.
  template <typename Post>
  void release_due(double now, Post&& post) {
    while (!queue_.empty() && queue_.front().due <= now) {
      const HeldSend send = queue_.front();
      queue_.pop_front();
      held_[static_cast<size_t>(send.id)] = 0;
      post(send);
    }
  }
  // Forgets a held send (a cancelled request); false when `id` is not held.
  bool drop(int64_t id) {
    if (!holds(id)) return false;
    held_[static_cast<size_t>(id)] = 0;
    std::erase_if(queue_, [&](const HeldSend& s) { return s.id == id; });
    return true;
  }
  bool empty() const { return queue_.empty(); }

 private:
  std::deque<HeldSend> queue_;
  std::vector<char> held_;  // by request id: 1 while in queue_ (O(1) for the channel's every test())
};

}  // namespace glacier::comm
