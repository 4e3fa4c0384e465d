// Prompts handed out to pipeline replicas from one queue: world rank 0 (the coordinator, itself the
// driver of replica 0) gives each replica driver prompt indices when it asks for more, so a slow replica
// takes fewer, and collects their results for the one set of output files.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <optional>
#include <vector>

#include "comm/channel.h"
#include "io/result_record.h"

namespace glacier::app {

// A prompt's result records (one a sample) as bytes and back (text is raw bytes, so no JSON): one
// message a prompt, so the coordinator counts prompts. decode throws std::runtime_error on a malformed buffer.
std::vector<uint8_t> encode_results(const std::vector<io::ResultRecord>& rows);
std::vector<io::ResultRecord> decode_results(const uint8_t* data, size_t size);

class WorkCoordinator {
 public:
  // `clients`: the world ranks of the other replicas' drivers. `queue`: prompt indices still to run.
  WorkCoordinator(comm::Channel& world, std::vector<int> clients, std::deque<int32_t> queue);
  WorkCoordinator(const WorkCoordinator&) = delete;
  WorkCoordinator& operator=(const WorkCoordinator&) = delete;

  // Up to n indices for the coordinator's own replica, within its fair share (below).
  std::vector<int32_t> take(int32_t n);
  // One of the coordinator's own indices has its result (finished or failed).
  void own_result() { ++own_results_; }
  // Answers the clients' requests and passes on the results that arrived. Never blocks.
  void serve(const std::function<void(io::ResultRecord&&)>& on_result);
  // After a stop request: nothing more is handed out.
  void stop_handing_out() { stopped_ = true; }
  // Every client has said it is done and every result it announced has arrived.
  bool clients_done() const;
  bool queue_empty() const { return queue_.empty(); }

 private:
  // Guided self-scheduling: a replica may hold (have been handed and not yet returned) at most an equal
  // share of the work still open, ceil((queued + held by all) / replicas). A replica that finishes sooner
  // comes back sooner and so takes more; a slow one holds no more than its share, and a small job is
  // spread over every replica instead of filling the first one's slots.
  int64_t share_left(int64_t held) const;
  int64_t held_by_all() const;

  struct Client {
    int rank;
    int64_t want = 0;             // the posted request's buffer
    bool want_pending = false;    // a request received and not answered yet (waiting for its share)
    int64_t handed = 0;           // indices sent to it
    comm::Request request;
    std::vector<int32_t> reply;   // kept until its send completes
    comm::Request reply_sent;
    int64_t results_received = 0;
    int64_t results_announced = -1;  // set by the client's closing message
  };
  comm::Channel& world_;
  std::vector<Client> clients_;
  std::deque<int32_t> queue_;
  bool stopped_ = false;
  int64_t own_handed_ = 0, own_results_ = 0;
  std::vector<uint8_t> result_buf_;
};

class WorkClient {
 public:
  WorkClient(comm::Channel& world, int coordinator);
  WorkClient(const WorkClient&) = delete;
  WorkClient& operator=(const WorkClient&) = delete;

  // Asks for up to `want` indices unless a request is outstanding; returns indices that have arrived
  // (empty while none has). Never blocks.
  std::vector<int32_t> poll(int32_t want);
  // Blocks until an answer to a (possibly new) request for `want` arrives; empty means no more work.
  std::vector<int32_t> wait(int32_t want);
  // True once the coordinator has answered with no work.
  bool exhausted() const { return exhausted_; }
  // Sends one prompt's rows (every sample's) as one result.
  void send_results(const std::vector<io::ResultRecord>& rows);
  // Announces how many results were sent and waits until every send has left.
  void finish();

 private:
  void ask(int32_t want);
  std::vector<int32_t> take_reply(size_t bytes);
  void reap_sends(bool wait);

  comm::Channel& world_;
  int coordinator_;
  int64_t want_ = 0;
  comm::Request request_sent_, reply_;
  std::vector<int32_t> reply_buf_;
  bool exhausted_ = false;
  int64_t results_sent_ = 0;
  struct Outgoing {
    std::vector<uint8_t> bytes;
    comm::Request req;
  };
  std::list<Outgoing> outgoing_;
};

}  // namespace glacier::app
