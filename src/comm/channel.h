// The message-passing interface the pipeline uses: nonblocking point-to-point transfers of byte
// buffers plus the few collectives a job needs. MpiChannel implements it over MPI; the pipeline and
// its tests never include mpi.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace glacier::comm {

// Thrown by wait() when the stall watchdog finds a rank that makes no progress (stopped, hung, or
// dead without the launcher noticing). The job cannot end collectively then: the caller saves what it
// has and aborts every rank.
class StallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The watchdog and fault-injection settings of a channel (both off by default).
struct ChannelFaultSettings {
  // A wait with no completion for this long starts a liveness check of every rank (0 = off).
  double stall_timeout_s = 0.0;
  // Every point-to-point send leaves this much later than asked, without blocking the sender: it stands
  // in for a slow link (a scaling study's injected hop latency).
  double send_delay_s = 0.0;
};

// Handle of an outstanding transfer; `id` is the channel's own bookkeeping index.
struct Request {
  int64_t id = -1;
  bool active() const { return id >= 0; }
};

class Channel {
 public:
  virtual ~Channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The buffer must stay untouched until the request completes.
  virtual Request isend(const void* buf, size_t bytes, int dest, int tag) = 0;
  virtual Request irecv(void* buf, size_t capacity, int src, int tag) = 0;
  // True once complete (the request is then released); drives progress of every transfer.
  virtual bool test(Request& r, size_t* received_bytes = nullptr) = 0;
  // Blocks until complete without spinning a core: backs off from yielding to short sleeps.
  virtual void wait(Request& r, size_t* received_bytes = nullptr) = 0;
  // Cancels a posted receive that will never match (at shutdown) and releases it.
  virtual void cancel(Request& r) = 0;
  // Drives progress of outstanding transfers (called between layers while computing).
  virtual void progress() = 0;
  // Size of the next message from `src` with `tag` that no posted receive has taken, or nullopt when
  // none has arrived (messages whose size the receiver cannot know in advance).
  virtual std::optional<size_t> probe(int src, int tag) = 0;

  // Applies watchdog and delay settings; call before the first transfer. A transport whose ranks
  // cannot stall independently (threads of one process in tests) may ignore them.
  virtual void configure_faults(const ChannelFaultSettings& settings) = 0;

  // Collectives over all ranks.
  // Every rank learns the lowest-ranked error message, or nullopt when no rank had one.
  virtual std::optional<std::string> agree_on_error(const std::optional<std::string>& local_error) = 0;
  virtual std::vector<int64_t> allgather(int64_t value) = 0;
  virtual std::vector<std::string> allgather_strings(const std::string& value) = 0;
  virtual void barrier() = 0;
  // Collective: a channel over the ranks that passed the same color, ranked in this channel's order
  // (the pipeline replicas of a job). Its messages never meet this channel's.
  virtual std::unique_ptr<Channel> split(int color) = 0;
  virtual std::string host_name() const = 0;
  // Ranks sharing this rank's host, and this rank's index among them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
};

}  // namespace glacier::comm
