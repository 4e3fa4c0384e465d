// The replicas' work protocol on the world channel. A client's request is one int64: how many indices
// it wants, or -(results sent + 1) as its closing message. The reply is the indices (none: no more work).
// Results travel as encode_result() bytes; the coordinator learns their size by probing.
#include "app/work_queue.h"

#include "comm/message_tags.h"
#include "io/prompt_record.h"
#include "util/backoff.h"
#include "util/byte_codec.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace glacier::app {
namespace {

using util::ByteReader;
using util::ByteWriter;

// Tags of the world channel (the pipelines run on their own replica channels).
constexpr int kTagWantWork = comm::tags::kWantWork;
constexpr int kTagWork = comm::tags::kWork;
constexpr int kTagResult = comm::tags::kResult;
// Indices one request may ask for: a replica's KV slots keep it busy; more would starve the others.
constexpr int32_t kMaxIndicesPerRequest = 4096;

// Sleeps between polls of an idle wait: a coordinator or client with nothing to do must not spin a
// core a stage computes on.
void idle_pause() { Backoff(backoff::kIdleCoordinator).pause(); }

}  // namespace

namespace {

void put_result(ByteWriter& w, const io::ResultRecord& r) {
  w.put_string(r.id);
  w.put<int64_t>(r.index);
  w.put<int64_t>(r.sample);
  w.put_string(r.status);
  w.put_string(r.error);
  w.put_vector(r.prompt_tokens);
  w.put_vector(r.tokens);
  w.put_string(r.text);
  w.put_vector(r.logprobs);
  w.put<int32_t>(r.top_logprobs);
  w.put_vector(r.top_ids);
  w.put_vector(r.top_values);
  w.put<int32_t>(r.prompt_logprobs);
  w.put_vector(r.prompt_logprob_values);
  w.put_vector(r.prompt_top_ids);
  w.put_vector(r.prompt_top_values);
  w.put_string(r.finish_reason);
  w.put<double>(r.time_to_first_token_s);
  w.put<double>(r.total_time_s);
  w.put<uint8_t>(r.score);
  w.put<double>(r.sum_logprob);
  w.put<uint8_t>(r.greedy);
}

io::ResultRecord get_result(ByteReader& in) {
  io::ResultRecord r;
  r.id = in.get_string();
  r.index = in.get<int64_t>();
  r.sample = in.get<int64_t>();
  r.status = in.get_string();
  r.error = in.get_string();
  r.prompt_tokens = in.get_vector<int32_t>();
  r.tokens = in.get_vector<int32_t>();
  r.text = in.get_string();
  r.logprobs = in.get_vector<float>();
  r.top_logprobs = in.get<int32_t>();
  r.top_ids = in.get_vector<int32_t>();
  r.top_values = in.get_vector<float>();
  r.prompt_logprobs = in.get<int32_t>();
  r.prompt_logprob_values = in.get_vector<float>();
  r.prompt_top_ids = in.get_vector<int32_t>();
  r.prompt_top_values = in.get_vector<float>();
  r.finish_reason = in.get_string();
  r.time_to_first_token_s = in.get<double>();
  r.total_time_s = in.get<double>();
  r.score = in.get<uint8_t>() != 0;
  r.sum_logprob = in.get<double>();
  r.greedy = in.get<uint8_t>() != 0;
  return r;
}

}  // namespace

std::vector<uint8_t> encode_results(const std::vector<io::ResultRecord>& rows) {
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(rows.size()));
  for (const io::ResultRecord& r : rows) put_result(w, r);
  return w.take();
}

std::vector<io::ResultRecord> decode_results(const uint8_t* data, size_t size) {
  ByteReader in(data, size, "result message");
  const auto n = in.get<int64_t>();
  if (n < 1 || n > io::kMaxSamplesPerPrompt)
    throw std::runtime_error("result message: expected 1.." + std::to_string(io::kMaxSamplesPerPrompt) + " rows, found " +
                             std::to_string(n));
  std::vector<io::ResultRecord> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(get_result(in));
  if (in.left() != 0) throw std::runtime_error("result message: " + std::to_string(in.left()) + " bytes left over");
  return rows;
}

WorkCoordinator::WorkCoordinator(comm::Channel& world, std::vector<int> clients, std::deque<int32_t> queue)
    : world_(world), queue_(std::move(queue)) {
  clients_.resize(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    Client& c = clients_[i];
    c.rank = clients[i];
    c.request = world_.irecv(&c.want, sizeof c.want, c.rank, kTagWantWork);
  }
}

int64_t WorkCoordinator::held_by_all() const {
  int64_t held = own_handed_ - own_results_;
  for (const Client& c : clients_) held += c.handed - c.results_received;
  return held;
}

int64_t WorkCoordinator::share_left(int64_t held) const {
  const int64_t replicas = static_cast<int64_t>(clients_.size()) + 1;
  const int64_t open = static_cast<int64_t>(queue_.size()) + held_by_all();
  return std::max<int64_t>(0, (open + replicas - 1) / replicas - held);
}

std::vector<int32_t> WorkCoordinator::take(int32_t n) {
  std::vector<int32_t> out;
  if (stopped_) return out;
  int64_t room = std::min<int64_t>(n, share_left(own_handed_ - own_results_));
  while (room-- > 0 && !queue_.empty()) {
    out.push_back(queue_.front());
    queue_.pop_front();
  }
  own_handed_ += static_cast<int64_t>(out.size());
  return out;
}

void WorkCoordinator::serve(const std::function<void(io::ResultRecord&&)>& on_result) {
  for (Client& c : clients_) {
    while (auto size = world_.probe(c.rank, kTagResult)) {
      result_buf_.resize(*size);
      comm::Request r = world_.irecv(result_buf_.data(), result_buf_.size(), c.rank, kTagResult);
      world_.wait(r);
      ++c.results_received;
      for (io::ResultRecord& row : decode_results(result_buf_.data(), result_buf_.size())) on_result(std::move(row));
    }
    if (c.reply_sent.active() && !world_.test(c.reply_sent)) continue;  // one answer in flight at a time
    if (!c.want_pending) {
      if (!c.request.active() || !world_.test(c.request)) continue;
      if (c.want < 0) {
        c.results_announced = -c.want - 1;  // the closing message; no new receive
        continue;
      }
      c.want_pending = true;
    }
    // An empty reply means "no more work", so a replica at its share waits for an answer until its
    // results bring it under (or the queue runs dry, or the job stops).
    const int64_t room = std::min<int64_t>({c.want, kMaxIndicesPerRequest, share_left(c.handed - c.results_received)});
    if (room == 0 && !queue_.empty() && !stopped_) continue;
    c.reply.clear();
    while (!stopped_ && static_cast<int64_t>(c.reply.size()) < room && !queue_.empty()) {
      c.reply.push_back(queue_.front());
      queue_.pop_front();
    }
    c.handed += static_cast<int64_t>(c.reply.size());
    c.want_pending = false;
    c.reply_sent = world_.isend(c.reply.data(), c.reply.size() * sizeof(int32_t), c.rank, kTagWork);
    c.request = world_.irecv(&c.want, sizeof c.want, c.rank, kTagWantWork);
  }
}

bool WorkCoordinator::clients_done() const {
  for (const Client& c : clients_)
    if (c.results_announced < 0 || c.results_received < c.results_announced || c.reply_sent.active()) return false;
  return true;
}

WorkClient::WorkClient(comm::Channel& world, int coordinator) : world_(world), coordinator_(coordinator) {}

void WorkClient::ask(int32_t want) {
  want_ = std::min(want, kMaxIndicesPerRequest);
  reply_buf_.resize(static_cast<size_t>(want_));
  reply_ = world_.irecv(reply_buf_.data(), reply_buf_.size() * sizeof(int32_t), coordinator_, kTagWork);
  request_sent_ = world_.isend(&want_, sizeof want_, coordinator_, kTagWantWork);
}

std::vector<int32_t> WorkClient::take_reply(size_t bytes) {
  if (request_sent_.active()) world_.wait(request_sent_);
  std::vector<int32_t> got(reply_buf_.begin(), reply_buf_.begin() + static_cast<ptrdiff_t>(bytes / sizeof(int32_t)));
  if (got.empty()) exhausted_ = true;
  return got;
}

std::vector<int32_t> WorkClient::poll(int32_t want) {
  reap_sends(false);
  if (exhausted_) return {};
  if (!reply_.active()) {
    if (want > 0) ask(want);
    return {};
  }
  size_t bytes = 0;
  if (!world_.test(reply_, &bytes)) return {};
  return take_reply(bytes);
}

std::vector<int32_t> WorkClient::wait(int32_t want) {
  if (exhausted_) return {};
  if (!reply_.active()) ask(want);
  size_t bytes = 0;
  while (!world_.test(reply_, &bytes)) {
    reap_sends(false);
    idle_pause();
  }
  return take_reply(bytes);
}

void WorkClient::send_results(const std::vector<io::ResultRecord>& rows) {
  outgoing_.push_back({encode_results(rows), {}});
  Outgoing& o = outgoing_.back();  // std::list: the bytes stay put until the send completes
  o.req = world_.isend(o.bytes.data(), o.bytes.size(), coordinator_, kTagResult);
  ++results_sent_;
  reap_sends(false);
}

void WorkClient::reap_sends(bool wait) {
  std::erase_if(outgoing_, [&](Outgoing& o) {
    if (wait) {
      world_.wait(o.req);
      return true;
    }
    return world_.test(o.req);
  });
}

void WorkClient::finish() {
  // An unanswered request is answered before the closing message is read: wait for it and drop it
  // (a draining replica takes no more work; the indices stay unfinished for --resume).
  if (reply_.active()) {
    size_t bytes = 0;
    world_.wait(reply_, &bytes);
  }
  if (request_sent_.active()) world_.wait(request_sent_);
  reap_sends(true);
  int64_t closing = -(results_sent_ + 1);
  comm::Request r = world_.isend(&closing, sizeof closing, coordinator_, kTagWantWork);
  world_.wait(r);
}

}  // namespace glacier::app
