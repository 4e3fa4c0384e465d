// ThreadPool: workers sleep on an atomic generation counter (futex-backed wait) between jobs, after a
// short spin. Sleeping matters: oversubscribed MPI ranks must not burn a core another rank computes on.
#include "util/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace glacier {
namespace {
// How long a worker spins for the next job before it sleeps. In a forward pass the next product follows
// within tens of microseconds (a norm, a quantization between them), and waking a sleeping thread costs
// about as much on a VM, which in decode (a hundred products a token) was several percent of the time;
// a spin this short still leaves an idle rank's core to the others almost at once.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(100);
// Clock reads are not free: look at the clock once every this many spins.
constexpr int kSpinsPerClockRead = 64;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until done() or the spin budget is over; returns done().
template <typename Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % kSpinsPerClockRead == 0 && std::chrono::steady_clock::now() > deadline) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads, std::function<void(int)> on_thread_start)
    : n_threads_(n_threads < 1 ? 1 : n_threads) {
  if (on_thread_start) on_thread_start(0);
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i, on_thread_start] {
      if (on_thread_start) on_thread_start(i);
      worker_loop(i);
    });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::share(int64_t n, int n_threads, int t, int64_t* begin, int64_t* end) {
  int64_t base = n / n_threads, extra = n % n_threads;
  *begin = t * base + (t < extra ? t : extra);
  *end = *begin + base + (t < extra ? 1 : 0);
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  start_job(n, 0, fn);
  run_share(0);
  wait_for_workers();
}

void ThreadPool::parallel_for_claimed(int64_t n, int64_t chunk, FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  if (chunk < 1) chunk = 1;
  if (n_threads_ == 1 || n <= chunk) {
    fn(0, n, 0);
    return;
  }
  start_job(n, chunk, fn);
  run_share(0);
  wait_for_workers();
}

void ThreadPool::start_job(int64_t n, int64_t chunk, FunctionRef<void(int64_t, int64_t, int)>& fn) {
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
}

void ThreadPool::run_share(int index) {
  if (job_chunk_ == 0) {
    int64_t b, e;
    share(job_n_, n_threads_, index, &b, &e);
    if (b < e) (*job_)(b, e, index);
    return;
  }
  for (;;) {
    const int64_t b = next_chunk_.fetch_add(job_chunk_, std::memory_order_relaxed);
    if (b >= job_n_) return;
    (*job_)(b, b + job_chunk_ < job_n_ ? b + job_chunk_ : job_n_, index);
  }
}

void ThreadPool::wait_for_workers() {
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done)) {
    while (!all_done()) std::this_thread::yield();  // a worker was descheduled: give it the core
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  // Jobs are counted from construction: a worker that starts late must still see the first job.
  uint64_t seen = 0;
  for (;;) {
    auto next_job = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(next_job)) {
      while (!next_job()) generation_.wait(seen, std::memory_order_acquire);
    }
    const uint64_t g = generation_.load(std::memory_order_acquire);
    seen = g;
    if (stop_.load()) return;
    run_share(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace glacier
