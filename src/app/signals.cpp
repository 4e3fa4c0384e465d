// Stop-signal handlers: the handler only stores into a lock-free atomic, the one thing that is
// async-signal-safe; the job polls stop_requested() between scheduler steps.
#include "app/signals.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

namespace glacier::app {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

extern "C" void on_stop_signal(int signal_number) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal_number);
}

void install(int signal_number, const char* name) {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, nullptr) != 0)
    throw std::runtime_error(std::string("cannot install the ") + name + " handler: " + std::strerror(errno));
}

}  // namespace

void install_stop_signals() {
  install(SIGTERM, "SIGTERM");
  install(SIGUSR1, "SIGUSR1");
}

bool stop_requested() { return g_stop_signal.load() != 0; }

int stop_signal() { return g_stop_signal.load(); }

void clear_stop_request() { g_stop_signal.store(0); }

}  // namespace glacier::app
