// Start-up watchdog over MPI_COMM_WORLD on tags of its own: ranks report to rank 0 and rank 0 beats to
// them, every beat interval and at each phase change; rank 0 names a rank it has not heard from for the
// stall timeout and tells the others before the job is aborted; the others name rank 0 when it goes quiet.
#include "comm/startup_watchdog.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <list>
#include <vector>

#include "comm/channel.h"
#include "comm/message_tags.h"
#include "comm/stop_relay.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/text_format.h"

namespace glacier::comm::startup {
namespace {

constexpr int kTagReport = tags::kStartupReport;
constexpr int kTagBeat = tags::kStartupBeat;
constexpr int kTagVerdict = tags::kStartupVerdict;
// Waits look at the watchdog's messages at most this often (an MPI call that finds nothing yields the
// core on an oversubscribed node); long next to the call, short next to any stall timeout.
constexpr double kServiceIntervalS = 0.01;
// How long rank 0 gives its verdict to reach the other ranks before the abort kills them, so that every
// rank's log says why it ends.
constexpr double kVerdictDeliveryS = 0.5;

// Reports a few times within the timeout, so one late report is not a stall; at most once a second.
double beat_interval(double timeout) { return std::clamp(timeout / 4.0, 0.05, 1.0); }

struct Report {
  char phase[112] = {};
  char detail[112] = {};
  char host[32] = {};
};
struct Verdict {
  char text[1024] = {};
};
template <typename Body>
struct Outgoing {
  Body body;
  MPI_Request req = MPI_REQUEST_NULL;
};

void copy(char* to, size_t size, const std::string& from) {
  std::snprintf(to, size, "%s", from.c_str());
}

struct Watch {
  bool on = false;
  double timeout = 0.0, interval = 1.0;
  int rank = 0, size = 1;
  std::string phase = "MPI initialized", detail, host;
  double last_service = 0.0, last_sent = -1e300;
  std::vector<double> heard;  // when each watched rank last reported (rank 0: every rank; others: rank 0)
  std::vector<Report> last;   // what it reported
  std::list<Outgoing<Report>> reports;
  std::list<Outgoing<Verdict>> verdicts;

  Report mine() const {
    Report r;
    copy(r.phase, sizeof r.phase, phase);
    copy(r.detail, sizeof r.detail, detail);
    copy(r.host, sizeof r.host, host);
    return r;
  }

  void send(int dest, int tag) {
    reports.push_back({mine(), MPI_REQUEST_NULL});
    MPI_Isend(&reports.back().body, sizeof(Report), MPI_BYTE, dest, tag, MPI_COMM_WORLD, &reports.back().req);
  }

  void beat(double now) {
    last_sent = now;
    if (rank == 0) {
      for (int r = 1; r < size; ++r) send(r, kTagBeat);
    } else {
      send(0, kTagReport);
    }
    std::erase_if(reports, [](Outgoing<Report>& o) {
      int done = 0;
      MPI_Test(&o.req, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
  }

  void receive(double now) {
    const int tag = rank == 0 ? kTagReport : kTagBeat;
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st), flag) {
      Report r;
      MPI_Recv(&r, sizeof r, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      heard[static_cast<size_t>(st.MPI_SOURCE)] = now;
      last[static_cast<size_t>(st.MPI_SOURCE)] = r;
    }
    if (rank == 0) return;
    while (MPI_Iprobe(0, kTagVerdict, MPI_COMM_WORLD, &flag, &st), flag) {
      Verdict v;
      MPI_Recv(&v, sizeof v, MPI_BYTE, 0, kTagVerdict, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      on = false;
      throw StallError(std::string(v.text) + " (rank 0 ends the job; this rank was " + describe(phase, detail) + ")");
    }
  }

  static std::string describe(const std::string& p, const std::string& d) {
    return "'" + p + "'" + (d.empty() ? "" : " (" + d + ")");
  }

  std::string silence(int r, double now) const {
    const Report& rep = last[static_cast<size_t>(r)];
    const bool reported = rep.phase[0] != '\0';
    return format_line("rank %d (%s) has reported nothing for %.1f s (--stall-timeout %g) %s", r,
                       reported ? rep.host : "?", now - heard[static_cast<size_t>(r)], timeout,
                       reported ? ("in start-up phase " + describe(rep.phase, rep.detail)).c_str()
                                : "since start-up began (no report yet)");
  }

  void check(double now) {
    if (rank != 0) {
      if (now - heard[0] <= timeout) return;
      on = false;
      throw StallError("start-up watchdog on rank " + std::to_string(rank) + ": " + silence(0, now) +
                       ": rank 0 is stopped or hung; this rank was " + describe(phase, detail));
    }
    std::string silent;
    std::vector<bool> quiet(static_cast<size_t>(size), false);
    for (int r = 1; r < size; ++r) {
      if (now - heard[static_cast<size_t>(r)] <= timeout) continue;
      quiet[static_cast<size_t>(r)] = true;
      if (!silent.empty()) silent += "; ";
      silent += silence(r, now);
    }
    if (silent.empty()) return;
    on = false;
    const std::string text = "start-up watchdog: " + silent + ": stopped or hung; rank 0 was " +
                             describe(phase, detail) + "; ending the job";
    // Tell the live ranks why the job ends, and give the message a moment to arrive before the abort.
    for (int r = 1; r < size; ++r) {
      if (quiet[static_cast<size_t>(r)]) continue;
      verdicts.push_back({});
      copy(verdicts.back().body.text, sizeof verdicts.back().body.text, text);
      MPI_Isend(&verdicts.back().body, sizeof(Verdict), MPI_BYTE, r, kTagVerdict, MPI_COMM_WORLD,
                &verdicts.back().req);
    }
    const double until = now_seconds() + kVerdictDeliveryS;
    Backoff backoff(backoff::kCollective);
    while (now_seconds() < until && !verdicts.empty()) {
      std::erase_if(verdicts, [](Outgoing<Verdict>& o) {
        int done = 0;
        MPI_Test(&o.req, &done, MPI_STATUS_IGNORE);
        return done != 0;
      });
      backoff.pause();
    }
    throw StallError(text);
  }

  void service(bool force_beat) {
    if (!on) return;
    relay_stop_requests();
    const double now = now_seconds();
    if (!force_beat && now - last_service < kServiceIntervalS) return;
    last_service = now;
    receive(now);
    if (force_beat || now - last_sent >= interval) beat(now);
    check(now);
  }
};

Watch& watch() {
  static Watch w;
  return w;
}

// A world barrier that keeps the watchdog served while it waits, sleeping between tests.
void watched_barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  Backoff backoff(backoff::kCollective);
  while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done) {
    tick();
    backoff.pause();
  }
}

}  // namespace

void start(double stall_timeout_s) {
  Watch& w = watch();
  if (stall_timeout_s <= 0) return;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  if (w.size == 1) return;  // nobody to watch or be watched by
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  w.host.assign(name, static_cast<size_t>(len));
  w.timeout = stall_timeout_s;
  w.interval = beat_interval(stall_timeout_s);
  const double now = now_seconds();
  w.heard.assign(static_cast<size_t>(w.size), now);
  w.last.assign(static_cast<size_t>(w.size), Report{});
  w.on = true;
  w.service(true);
}

bool active() { return watch().on; }

void phase(const std::string& name) {
  Watch& w = watch();
  w.phase = name;
  w.detail.clear();
  GLACIER_LOG_DEBUG("start-up phase: %s", name.c_str());
  w.service(true);
}

void progress(const std::string& detail) {
  Watch& w = watch();
  w.detail = detail;
  w.service(false);
}

void tick() { watch().service(false); }

void sync(const std::string& phase_name) {
  phase(phase_name);
  if (active()) watched_barrier();
}

void finish() {
  Watch& w = watch();
  phase("ready");
  if (!w.on) return;
  watched_barrier();
  w.on = false;
  // Reports sent before the barrier may still arrive: take them, so no stray message is left queued.
  int flag = 0;
  MPI_Status st;
  const int tag = w.rank == 0 ? kTagReport : kTagBeat;
  while (MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st), flag) {
    Report r;
    MPI_Recv(&r, sizeof r, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  for (auto& o : w.reports) MPI_Request_free(&o.req);  // small eager messages: they complete on their own
  w.reports.clear();
}

}  // namespace glacier::comm::startup
