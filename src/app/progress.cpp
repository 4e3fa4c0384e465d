// Progress reporting: rates are averages since the start of this run (smooth enough for a batch job
// and free of tuning constants); the ETA divides the prompts left by the prompt rate.
#include "app/progress.h"

#include <algorithm>
#include <cmath>

#include "util/clock.h"

namespace glacier::app {
namespace {

constexpr int kBarWidth = 10;

std::string format_rate(double tok_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::max(0.0, tok_per_s));
  return buf;
}

// Appends the counts, rate and ETA, sep between them; piece by piece, as GCC 12 warns falsely
// (-Wrestrict) on "literal" + std::string chains.
void append_fields(std::string& line, const std::string& counts, const std::string& rate, const std::string& eta,
                   const char* sep) {
  line += counts;
  line += sep;
  line += rate;
  line += sep;
  line += eta;
}

}  // namespace

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[48];
  if (total < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(total));
  } else if (total < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>(total % 3600 / 60));
  }
  return buf;
}

std::string format_progress(int64_t done, int64_t total, double tok_per_s, double eta_seconds, bool tty) {
  const std::string counts = std::to_string(done) + "/" + std::to_string(total) + " prompts";
  const std::string rate = format_rate(tok_per_s) + " tok/s";
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string chains.
  std::string eta = "ETA ";
  eta += eta_seconds < 0 || !std::isfinite(eta_seconds) ? std::string("--") : format_duration(eta_seconds);
  std::string line;
  if (!tty) {
    line = "progress: ";
    append_fields(line, counts, rate, eta, ", ");
    return line;
  }
  const int64_t filled =
      total > 0 ? std::clamp<int64_t>(done * kBarWidth / total, 0, kBarWidth) : kBarWidth;  // nothing to do is all done
  line.assign(1, '[');
  line.append(static_cast<size_t>(filled), '#');
  line.append(static_cast<size_t>(kBarWidth - filled), '.');
  line += "] ";
  append_fields(line, counts, rate, eta, "  ");
  return line;
}

Progress::Progress(int64_t total, bool is_tty, std::FILE* out)
    : total_(total), tty_(is_tty), out_(out), start_(now_seconds()) {}

void Progress::update(int64_t done, int64_t tokens_generated) { update_at(now_seconds() - start_, done, tokens_generated); }

void Progress::update_at(double elapsed, int64_t done, int64_t tokens_generated) {
  if (finished_) return;
  done_ = done;
  tokens_ = tokens_generated;
  const bool due = tty_ ? last_print_ < 0 || elapsed - last_print_ >= kTtyInterval
                        : elapsed - std::max(0.0, last_print_) >= kLogInterval;
  if (due) print(elapsed);
}

void Progress::finish() { finish_at(now_seconds() - start_); }

void Progress::finish_at(double elapsed) {
  if (finished_) return;
  print(elapsed);
  if (tty_) std::fputc('\n', out_);
  std::fflush(out_);
  finished_ = true;
}

void Progress::print(double elapsed) {
  const int64_t done_here = done_ - already_done_;
  const double tok_per_s = elapsed > 0 ? static_cast<double>(tokens_) / elapsed : 0;
  double eta = -1;
  if (done_ >= total_) {
    eta = 0;
  } else if (done_here > 0 && elapsed > 0) {
    eta = static_cast<double>(total_ - done_) * elapsed / static_cast<double>(done_here);
  }
  std::string line = format_progress(done_, total_, tok_per_s, eta, tty_);
  if (tty_) {
    const size_t width = line.size();
    if (width < last_width_) line.append(last_width_ - width, ' ');  // blank what the longer line left
    last_width_ = width;
    std::fprintf(out_, "\r%s", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_print_ = elapsed;
}

}  // namespace glacier::app
