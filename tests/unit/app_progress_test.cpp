// Progress lines: the exact wording of the terminal bar and the log line, duration formatting, and the
// refresh limits (10 per second on a terminal, one line per 10 s in a log) with a test-driven clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "app/progress.h"

namespace glacier::app {
namespace {

// Everything a Progress printed to a temporary file.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  return out;
}

size_t count(const std::string& text, char c) { return static_cast<size_t>(std::count(text.begin(), text.end(), c)); }

TEST(AppProgress, TerminalLine) {
  EXPECT_EQ(format_progress(123, 1000, 456.7, 192, true), "[#.........] 123/1000 prompts  456.7 tok/s  ETA 3m12s");
  EXPECT_EQ(format_progress(500, 1000, 80, 65, true), "[#####.....] 500/1000 prompts  80.0 tok/s  ETA 1m05s");
  EXPECT_EQ(format_progress(1000, 1000, 12.34, 0, true), "[##########] 1000/1000 prompts  12.3 tok/s  ETA 0s");
  EXPECT_EQ(format_progress(0, 7, 0, -1, true), "[..........] 0/7 prompts  0.0 tok/s  ETA --");
  EXPECT_EQ(format_progress(0, 0, 0, 0, true), "[##########] 0/0 prompts  0.0 tok/s  ETA 0s");
}

TEST(AppProgress, LogLine) {
  EXPECT_EQ(format_progress(123, 1000, 456.7, 192, false), "progress: 123/1000 prompts, 456.7 tok/s, ETA 3m12s");
  EXPECT_EQ(format_progress(3, 10, 1.25, -1, false), "progress: 3/10 prompts, 1.2 tok/s, ETA --");
}

TEST(AppProgress, Durations) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(59.4), "59s");
  EXPECT_EQ(format_duration(60), "1m00s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(3600), "1h00m");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 59), "2h05m");
  EXPECT_EQ(format_duration(100 * 3600), "100h00m");
  EXPECT_EQ(format_duration(-5), "0s");
}

TEST(AppProgress, TerminalRefreshesAtMostTenTimesASecond) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(100, true, f);
  p.update_at(0.00, 1, 10);   // first update: printed
  p.update_at(0.05, 2, 20);   // 50 ms later: skipped
  p.update_at(0.12, 3, 30);   // printed
  p.update_at(0.15, 4, 40);   // skipped
  p.update_at(0.30, 50, 60);  // printed
  EXPECT_EQ(count(contents(f), '\r'), 3u);
  p.finish_at(1.0);
  p.finish_at(2.0);  // a second finish prints nothing
  const std::string out = contents(f);
  EXPECT_EQ(count(out, '\r'), 4u);
  EXPECT_EQ(count(out, '\n'), 1u);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  // The final state: 50 prompts in 1 s, 60 tokens in 1 s, 50 left at 50 prompts/s.
  EXPECT_NE(out.find("[#####.....] 50/100 prompts  60.0 tok/s  ETA 1s"), std::string::npos) << out;
  std::fclose(f);
}

TEST(AppProgress, ShorterTerminalLineBlanksTheLongerOne) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(10, true, f);
  p.update_at(1.0, 1, 123456);  // long rate text
  p.update_at(2.0, 2, 2);       // short rate text
  const std::string out = contents(f);
  const size_t second = out.rfind('\r');
  const size_t first_len = second - 1;  // the first line, without its '\r'
  EXPECT_EQ(out.size() - second - 1, first_len) << "the second line is padded to the first one's width";
  std::fclose(f);
}

TEST(AppProgress, LogPrintsOneLineEveryTenSeconds) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(1000, false, f);
  p.update_at(1, 1, 10);      // a short job's log stays quiet: nothing before 10 s
  p.update_at(9.9, 2, 20);
  p.update_at(10.0, 100, 1000);  // printed
  p.update_at(15, 150, 1500);
  p.update_at(19.9, 199, 1990);
  p.update_at(20.0, 200, 2000);  // printed
  std::string out = contents(f);
  EXPECT_EQ(count(out, '\n'), 2u) << out;
  EXPECT_EQ(count(out, '\r'), 0u);
  // 100 prompts in 10 s: 900 left at 10 prompts/s.
  EXPECT_NE(out.find("progress: 100/1000 prompts, 100.0 tok/s, ETA 1m30s\n"), std::string::npos) << out;
  p.finish_at(25);
  out = contents(f);
  EXPECT_EQ(count(out, '\n'), 3u);
  std::fclose(f);
}

TEST(AppProgress, ResumedPromptsDoNotCountTowardsTheRate) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(1000, false, f);
  p.set_already_done(600);
  p.update_at(10, 700, 500);  // 100 prompts in 10 s this run: 300 left take 30 s
  EXPECT_NE(contents(f).find("progress: 700/1000 prompts, 50.0 tok/s, ETA 30s"), std::string::npos) << contents(f);
  std::fclose(f);
}

}  // namespace
}  // namespace glacier::app
