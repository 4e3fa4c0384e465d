// A fixed pool of worker threads. parallel_for(n, fn) gives each thread one contiguous range, so the split
// (and thus every result) depends only on n and the thread count; parallel_for_claimed cuts the range into
// chunks the threads take as they finish, for work whose pieces are independent of each other.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace glacier {

// Non-owning reference to a callable: no heap allocation, unlike std::function.
template <typename Sig>
class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): used like a lambda parameter
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(Args... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  // on_thread_start(i) runs first on worker i (1..n-1) and, for i = 0, on the constructing thread:
  // the place where src/sys pins threads to cores.
  explicit ThreadPool(int n_threads, std::function<void(int)> on_thread_start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread) on every thread with a contiguous share of [0, n); returns when all are done.
  void parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn);

  // Calls fn(begin, end, thread) on chunks of [0, n) of `chunk` elements (the last may be shorter), each
  // taken by the next thread free, so a thread the machine slows down (a VM's neighbour, an interrupt)
  // takes fewer of them. Which thread computes a chunk varies from run to run: only for work whose result
  // does not depend on it (each output element computed whole by one call).
  void parallel_for_claimed(int64_t n, int64_t chunk, FunctionRef<void(int64_t, int64_t, int)> fn);

  // The share of [0, n) that thread t gets (static partition).
  static void share(int64_t n, int n_threads, int t, int64_t* begin, int64_t* end);

 private:
  void worker_loop(int index);
  void start_job(int64_t n, int64_t chunk, FunctionRef<void(int64_t, int64_t, int)>& fn);
  void run_share(int index);  // this thread's part of the current job
  void wait_for_workers();

  int n_threads_;
  std::vector<std::thread> workers_;
  FunctionRef<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;                 // 0: the static partition
  std::atomic<int64_t> next_chunk_{0};  // with job_chunk_: the start of the next chunk to take
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace glacier
