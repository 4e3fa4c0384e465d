// Stop-signal handlers: the handler only stores into a lock-free atomic (util/stop_request), the one
// thing that is async-signal-safe; the job polls stop_requested() between scheduler steps.
#include "app/signals.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "util/stop_request.h"

namespace glacier::app {
namespace {

extern "C" void on_stop_signal(int signal_number) { stop::note_local(signal_number); }

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
  install(SIGINT, "SIGINT");
  install(SIGHUP, "SIGHUP");
  install(SIGUSR1, "SIGUSR1");
}

bool stop_requested() { return stop::requested(); }

int stop_signal() { return stop::signal_number(); }

std::string describe_stop() {
  const int sig = stop::signal_number();
  std::string s = stop::signal_name(sig);
  // Appended piece by piece: GCC 12 warns falsely on "literal" + std::to_string(...).
  if (s == "signal") {
    s += ' ';
    s += std::to_string(sig);
  }
  if (stop::from_rank() >= 0) {
    s += " to rank ";
    s += std::to_string(stop::from_rank());
  }
  return s;
}

void clear_stop_request() { stop::clear(); }

}  // namespace glacier::app
