// Logging implementation: one formatted line per call, written with a single fputs so that
// lines from different threads do not interleave mid-line.
#include "util/log.h"

#include <atomic>
#include <cstdio>

namespace glacier::log {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_level{static_cast<int>(Level::Info)};
const char* level_name(Level l) {
  switch (l) {
    case Level::Debug: return "debug: ";
    case Level::Info: return "";
    case Level::Warn: return "warning: ";
    case Level::Error: return "error: ";
  }
  return "";
}
}  // namespace

void set_rank(int rank) { g_rank = rank; }
void set_level(Level level) { g_level = static_cast<int>(level); }
Level level() { return static_cast<Level>(g_level.load()); }

void write(Level lvl, const char* fmt, ...) {
  if (static_cast<int>(lvl) < g_level.load()) return;
  char body[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(body, sizeof body, fmt, args);
  va_end(args);
  char line[2200];
  int rank = g_rank.load();
  if (rank >= 0)
    snprintf(line, sizeof line, "rank %d: %s%s\n", rank, level_name(lvl), body);
  else
    snprintf(line, sizeof line, "glacier: %s%s\n", level_name(lvl), body);
  fputs(line, stderr);
}

}  // namespace glacier::log
