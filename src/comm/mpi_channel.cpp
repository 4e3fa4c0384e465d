// MpiChannel: MPI_Isend/MPI_Irecv with a table of live requests. Waiting polls MPI_Test with a
// backoff (yield, then sleeps growing to 200 us): an oversubscribed rank must not busy-poll a core
// another rank computes on, and a 200 us ceiling costs little next to a micro-batch's compute.
#include "comm/mpi_channel.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "util/error.h"

namespace glacier::comm {
namespace {

class MpiChannel final : public Channel {
 public:
  MpiChannel() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
  }
  ~MpiChannel() override { MPI_Comm_free(&node_); }

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

  Request isend(const void* buf, size_t bytes, int dest, int tag) override {
    GLACIER_ASSERT(bytes <= static_cast<size_t>(INT32_MAX), "message under 2 GiB");
    Request r = slot();
    MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD, &live_[static_cast<size_t>(r.id)]);
    return r;
  }
  Request irecv(void* buf, size_t capacity, int src, int tag) override {
    GLACIER_ASSERT(capacity <= static_cast<size_t>(INT32_MAX), "buffer under 2 GiB");
    Request r = slot();
    MPI_Irecv(buf, static_cast<int>(capacity), MPI_BYTE, src, tag, MPI_COMM_WORLD, &live_[static_cast<size_t>(r.id)]);
    return r;
  }
  bool test(Request& r, size_t* received) override {
    GLACIER_ASSERT(r.active(), "test on an inactive request");
    int done = 0;
    MPI_Status st;
    MPI_Test(&live_[static_cast<size_t>(r.id)], &done, &st);
    if (!done) return false;
    if (received) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      *received = static_cast<size_t>(count);
    }
    free_.push_back(r.id);
    r.id = -1;
    return true;
  }
  void wait(Request& r, size_t* received) override {
    int idle = 0;
    while (!test(r, received)) {
      if (++idle < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, idle)));
      }
    }
  }
  void cancel(Request& r) override {
    if (!r.active()) return;
    MPI_Request& req = live_[static_cast<size_t>(r.id)];
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    free_.push_back(r.id);
    r.id = -1;
  }
  void progress() override {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  }

  std::optional<std::string> agree_on_error(const std::optional<std::string>& local) override {
    int mine = local ? rank_ : size_;
    int first = size_;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size_) return std::nullopt;
    int64_t len = rank_ == first ? static_cast<int64_t>(local->size()) : 0;
    MPI_Bcast(&len, 1, MPI_INT64_T, first, MPI_COMM_WORLD);
    std::string msg = rank_ == first ? *local : std::string(static_cast<size_t>(len), '\0');
    MPI_Bcast(msg.data(), static_cast<int>(len), MPI_CHAR, first, MPI_COMM_WORLD);
    return msg;
  }
  std::vector<int64_t> allgather(int64_t value) override {
    std::vector<int64_t> all(static_cast<size_t>(size_));
    MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
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
    MPI_Allgatherv(value.data(), static_cast<int>(value.size()), MPI_CHAR, all.data(), counts.data(), displs.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i) out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(counts[i])));
    return out;
  }
  void barrier() override {
    // A barrier that sleeps while it waits (MPI_Barrier would spin an oversubscribed core).
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0, idle = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done)
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * ++idle)));
  }

 private:
  Request slot() {
    Request r;
    if (!free_.empty()) {
      r.id = free_.back();
      free_.pop_back();
    } else {
      r.id = static_cast<int64_t>(live_.size());
      live_.push_back(MPI_REQUEST_NULL);
    }
    return r;
  }
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  std::vector<MPI_Request> live_;  // handles by Request::id (MPI keeps no pointer to these variables)
  std::vector<int64_t> free_;
};

}  // namespace

std::unique_ptr<Channel> make_mpi_channel() { return std::make_unique<MpiChannel>(); }

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::_Exit(code); }

}  // namespace glacier::comm
