// Stop-request state: lock-free atomics only, since a signal handler writes them.
#include "util/stop_request.h"

#include <atomic>
#include <csignal>

namespace glacier::stop {
namespace {

std::atomic<int> g_first_signal{0};  // the first stop, local or reported
std::atomic<int> g_first_rank{-1};   // -1: this process
std::atomic<int> g_local_signal{0};  // the first signal this process got itself
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

}  // namespace

void note_local(int signal_number) {
  int none = 0;
  g_local_signal.compare_exchange_strong(none, signal_number);
  none = 0;
  g_first_signal.compare_exchange_strong(none, signal_number);
}

void note_reported(int signal_number, int from_rank) {
  int none = 0;
  if (g_first_signal.compare_exchange_strong(none, signal_number)) g_first_rank.store(from_rank);
}

bool requested() { return g_first_signal.load() != 0; }
int signal_number() { return g_first_signal.load(); }
int from_rank() { return g_first_rank.load(); }
int local_signal() { return g_local_signal.load(); }

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal";
  }
}

void clear() {
  g_first_signal.store(0);
  g_first_rank.store(-1);
  g_local_signal.store(0);
}

}  // namespace glacier::stop
