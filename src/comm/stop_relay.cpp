// Stop relay over MPI_COMM_WORLD on a tag no other world message uses (the pipeline runs on split
// communicators; the work queue's tags are 31-33). The notice is small, so its send completes eagerly.
#include "comm/stop_relay.h"

#include <mpi.h>

#include <cstdint>

#include "comm/message_tags.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/stop_request.h"

namespace glacier::comm {
namespace {

constexpr int kTagStopNotice = tags::kStopNotice;
// Rank 0 looks for notices at most this often: a drain is not hurried by milliseconds, and an MPI call
// that finds nothing yields the core on an oversubscribed node.
constexpr double kStopPollIntervalS = 0.01;

struct Notice {
  int32_t signal_number = 0;
  int32_t rank = 0;
};

}  // namespace

void relay_stop_requests() {
  static int rank = -1, size = 1;
  static bool sent = false;
  static Notice notice;  // static: the send's buffer outlives the freed request
  static double last_poll = 0.0;
  if (rank < 0) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  if (size == 1) return;
  if (rank != 0) {
    if (sent || stop::local_signal() == 0) return;
    notice = {stop::local_signal(), rank};
    GLACIER_LOG_WARN("%s received: asking rank 0 to drain the job", stop::signal_name(notice.signal_number));
    MPI_Request req;
    MPI_Isend(&notice, sizeof notice, MPI_BYTE, 0, kTagStopNotice, MPI_COMM_WORLD, &req);
    MPI_Request_free(&req);
    sent = true;
    return;
  }
  const double now = now_seconds();
  if (now - last_poll < kStopPollIntervalS) return;
  last_poll = now;
  int flag = 0;
  MPI_Status st;
  while (MPI_Iprobe(MPI_ANY_SOURCE, kTagStopNotice, MPI_COMM_WORLD, &flag, &st), flag) {
    Notice got;
    MPI_Recv(&got, sizeof got, MPI_BYTE, st.MPI_SOURCE, kTagStopNotice, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    stop::note_reported(got.signal_number, got.rank);
  }
}

}  // namespace glacier::comm
