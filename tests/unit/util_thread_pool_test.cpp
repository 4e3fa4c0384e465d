// The thread pool's two ways of sharing [0, n): parallel_for's static shares (one contiguous range a
// thread, as share() computes) and parallel_for_pieces, where a thread held up leaves its pieces to others.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace {

using glacier::ThreadPool;

struct Call {
  int64_t begin, end;
  int thread;
};

// Every call the pool makes, and a count of how often each element was given out.
struct Record {
  std::mutex mu;
  std::vector<Call> calls;
  std::vector<int> hits;
  explicit Record(int64_t n) : hits(static_cast<size_t>(n), 0) {}
  void note(int64_t b, int64_t e, int t) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({b, e, t});
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
  }
};

TEST(ThreadPool, StaticSharesAreOneContiguousRangeAThread) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 10, 1000}) {
    Record rec(n);
    pool.parallel_for(n, [&](int64_t b, int64_t e, int t) { rec.note(b, e, t); });
    for (int h : rec.hits) EXPECT_EQ(h, 1) << "n " << n;
    for (const Call& c : rec.calls) {
      int64_t b, e;
      ThreadPool::share(n, n == 1 ? 1 : 3, c.thread, &b, &e);
      EXPECT_EQ(c.begin, b) << "n " << n << " thread " << c.thread;
      EXPECT_EQ(c.end, e) << "n " << n << " thread " << c.thread;
    }
  }
}

TEST(ThreadPool, PiecesCoverEveryElementOnceInAlignedPieces) {
  ThreadPool pool(2);
  for (const auto& [n, piece] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {7, 3}, {64, 4}, {1001, 10}, {5, 0}}) {
    Record rec(n);
    pool.parallel_for_pieces(n, piece, [&](int64_t b, int64_t e, int t) { rec.note(b, e, t); });
    for (int h : rec.hits) EXPECT_EQ(h, 1) << "n " << n << " piece " << piece;
    for (const Call& c : rec.calls) {
      EXPECT_TRUE(c.thread == 0 || c.thread == 1);
      if (n > piece && piece > 0) {
        EXPECT_EQ(c.begin % piece, 0) << "n " << n << " piece " << piece;
        EXPECT_LE(c.end - c.begin, piece);
      }
    }
  }
}

// A thread stuck in its first piece: the other takes every other piece (a static split would give it only
// its half, and the stuck piece would wait forever for the rest to finish; the wait has a limit instead).
TEST(ThreadPool, AHeldUpThreadLeavesItsPiecesToTheOthers) {
  ThreadPool pool(2);
  constexpr int64_t kPieces = 16;
  std::atomic<int> done{0};
  std::atomic<bool> one_held{false};
  std::vector<int> taken_by(kPieces, -1);
  pool.parallel_for_pieces(kPieces, 1, [&](int64_t b, int64_t, int t) {
    bool expected = false;
    if (one_held.compare_exchange_strong(expected, true)) {
      const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < kPieces - 1 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
    }
    taken_by[static_cast<size_t>(b)] = t;
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), kPieces);
  int held_thread_pieces[2] = {0, 0};
  for (int t : taken_by) {
    ASSERT_TRUE(t == 0 || t == 1);
    ++held_thread_pieces[t];
  }
  // One thread computed the held piece and nothing else; the other all the rest.
  EXPECT_TRUE((held_thread_pieces[0] == 1 && held_thread_pieces[1] == kPieces - 1) ||
              (held_thread_pieces[1] == 1 && held_thread_pieces[0] == kPieces - 1))
      << held_thread_pieces[0] << " and " << held_thread_pieces[1];
}

}  // namespace
