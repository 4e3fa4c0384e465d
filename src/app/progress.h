// Progress of a job on stderr: a refreshed bar on a terminal, a plain line every 10 s in a batch log
// (Slurm output files), so neither floods its medium.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace glacier::app {

// "[#####.....] 123/1000 prompts  456.7 tok/s  ETA 3m12s" (tty) or
// "progress: 123/1000 prompts, 456.7 tok/s, ETA 3m12s" (log). eta_seconds < 0 means not known yet
// ("ETA --"). Pure, so the wording is tested without a clock.
std::string format_progress(int64_t done, int64_t total, double tok_per_s, double eta_seconds, bool tty);

// "45s", "3m12s", "2h05m": coarser as the time grows, since nobody plans a job to the second.
std::string format_duration(double seconds);

class Progress {
 public:
  static constexpr double kTtyInterval = 0.1;  // seconds between terminal refreshes
  static constexpr double kLogInterval = 10;   // seconds between log lines

  explicit Progress(int64_t total, bool is_tty = isatty(2) != 0, std::FILE* out = stderr);

  // Prompts finished in an earlier run (--resume): they count as done but not towards the rate.
  void set_already_done(int64_t already_done) { already_done_ = already_done; }

  // `done` counts finished prompts (including already_done), `tokens_generated` the tokens generated
  // in this run; both cumulative.
  void update(int64_t done, int64_t tokens_generated);
  // The same at a given time, in seconds since construction (tests drive the clock).
  void update_at(double elapsed, int64_t done, int64_t tokens_generated);
  // Prints the last state once more (ends the terminal line); later calls do nothing.
  void finish();
  void finish_at(double elapsed);

 private:
  void print(double elapsed);

  int64_t total_;
  bool tty_;
  std::FILE* out_;
  double start_;
  int64_t already_done_ = 0;
  int64_t done_ = 0;
  int64_t tokens_ = 0;
  double last_print_ = -1;  // elapsed time of the last print, < 0 before the first
  size_t last_width_ = 0;   // terminal: the previous line's length, to blank its leftovers
  bool finished_ = false;
};

}  // namespace glacier::app
