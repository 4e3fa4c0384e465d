// The thread pool (util/thread_pool.h): the static split gives each thread its fixed share, and the
// claimed chunks cover every index exactly once, in chunks of the size asked, whatever thread takes them.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "util/thread_pool.h"

namespace {

using glacier::ThreadPool;

struct Call {
  int64_t begin, end;
  int thread;
};

// Every call a job makes, from whichever thread.
class Calls {
 public:
  void add(int64_t b, int64_t e, int t) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back({b, e, t});
  }
  // How many calls covered each index of [0, n).
  std::vector<int> coverage(int64_t n) const {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (const Call& c : calls_)
      for (int64_t i = c.begin; i < c.end; ++i) ++seen[static_cast<size_t>(i)];
    return seen;
  }
  const std::vector<Call>& all() const { return calls_; }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

TEST(ThreadPool, StaticSplitGivesEachThreadItsShare) {
  ThreadPool pool(3);
  Calls calls;
  pool.parallel_for(10, [&](int64_t b, int64_t e, int t) { calls.add(b, e, t); });
  ASSERT_EQ(calls.all().size(), 3u);
  for (const Call& c : calls.all()) {
    int64_t b = 0, e = 0;
    ThreadPool::share(10, 3, c.thread, &b, &e);
    EXPECT_EQ(std::make_pair(c.begin, c.end), std::make_pair(b, e)) << "thread " << c.thread;
  }
  EXPECT_EQ(calls.coverage(10), std::vector<int>(10, 1));
}

TEST(ThreadPool, ClaimedChunksCoverEveryIndexOnceInChunksOfTheSizeAsked) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 6, 7, 100, 1001}) {
      for (int64_t chunk : {1, 2, 6, 64}) {
        Calls calls;
        pool.parallel_for_claimed(n, chunk, [&](int64_t b, int64_t e, int t) { calls.add(b, e, t); });
        EXPECT_EQ(calls.coverage(n), std::vector<int>(static_cast<size_t>(n), 1))
            << threads << " threads, n " << n << ", chunk " << chunk;
        for (const Call& c : calls.all()) {
          EXPECT_GE(c.thread, 0);
          EXPECT_LT(c.thread, threads);
          if (n <= chunk || threads == 1) continue;  // one call of the whole range
          EXPECT_EQ(c.begin % chunk, 0) << "a chunk starts on a multiple of the chunk size";
          EXPECT_EQ(c.end - c.begin, std::min(chunk, n - c.begin)) << "only the last chunk is shorter";
        }
      }
    }
  }
}

TEST(ThreadPool, ClaimedChunksLetAFreeThreadTakeWhatASlowOneLeaves) {
  // Thread 0 (the caller) is held up on its first chunk until the others have taken all the rest: with
  // the static split it would have had half of the range to do after the hold-up.
  ThreadPool pool(2);
  constexpr int64_t kN = 64, kChunk = 4;
  std::atomic<int64_t> done_by_others{0};
  Calls calls;
  pool.parallel_for_claimed(kN, kChunk, [&](int64_t b, int64_t e, int t) {
    calls.add(b, e, t);
    if (t == 0) {
      while (done_by_others.load() + (e - b) < kN) std::this_thread::yield();
    } else {
      done_by_others += e - b;
    }
  });
  int64_t by_caller = 0;
  for (const Call& c : calls.all())
    if (c.thread == 0) by_caller += c.end - c.begin;
  EXPECT_EQ(by_caller, kChunk) << "the held-up thread took one chunk, the other thread all the rest";
  EXPECT_EQ(calls.coverage(kN), std::vector<int>(kN, 1));
}

TEST(ThreadPool, ClaimedChunksOfAChunkSizeBelowOneTakeOneIndexEach) {
  ThreadPool pool(2);
  Calls calls;
  pool.parallel_for_claimed(5, 0, [&](int64_t b, int64_t e, int t) { calls.add(b, e, t); });
  EXPECT_EQ(calls.all().size(), 5u);
  EXPECT_EQ(calls.coverage(5), std::vector<int>(5, 1));
}

}  // namespace
