// The stall watchdog of an MPI channel (--stall-timeout): when a wait sees no transfer complete for the
// timeout, rank 0 pings every rank on a private communicator and names the ranks that do not answer;
// the other ranks answer from their waits and between layers, and give up alone only when rank 0 is silent.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

namespace glacier::comm {

class StallWatchdog {
 public:
  // Duplicates `comm`: the watchdog's tags never meet the pipeline's messages.
  explicit StallWatchdog(MPI_Comm comm);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // Arms the watchdog (a timeout <= 0 leaves it off); `hosts` names each rank's host in its reports.
  void arm(double stall_timeout_s, std::vector<std::string> hosts);
  bool armed() const { return timeout_s_ > 0; }

  // Answers rank 0's pings and retires answers that have left. Cheap when nothing arrived.
  void serve();
  // A wait for `peer` begins (what the pings' answers report) or ends.
  void begin_wait(int peer, double now);
  void end_wait();
  // Called from a wait that has not completed; `quiet_since` is when the wait (or the last check that
  // found every rank alive) began, restarted here when a check finds every rank answering. Throws
  // StallError naming the silent ranks, or on a rank other than 0, rank 0's silence.
  void check(double& quiet_since);

 private:
  // A pong: the ping's sequence number, the rank the answering rank waits for (-1: it is computing),
  // and how long it has waited, in milliseconds. A ping carries only its sequence number.
  struct Pong {
    int64_t seq = 0;
    int64_t waiting_on = -1;
    int64_t waited_ms = 0;
  };
  struct Note {  // a watchdog message in flight
    Pong body;
    MPI_Request req = MPI_REQUEST_NULL;
  };

  void post_note(int dest, int tag, const Pong& body);
  void answer_pings();
  void collect_pongs();
  std::string describe_answers() const;
  std::string host(int r) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 0.0;
  std::vector<std::string> hosts_;
  std::list<Note> outbox_;  // std::list: a note's buffer stays put until its send completes
  // What this rank waits for (its answers) and rank 0's current liveness check.
  int waiting_on_ = -1;
  double wait_started_ = 0.0;
  double last_ping_ = 0.0;
  bool check_active_ = false;
  int64_t check_seq_ = 0;
  double check_started_ = 0.0;
  std::vector<std::optional<Pong>> answers_;
};

}  // namespace glacier::comm
