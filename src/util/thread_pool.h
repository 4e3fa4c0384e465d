// A fixed pool of worker threads. parallel_for(n, fn) gives each thread one contiguous range, so the split
// (and thus every result) depends only on n and the thread count; parallel_for_pieces hands out pieces to
// whichever thread is free, for work whose results do not depend on who computes what.
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

  // Calls fn(begin, end, thread) for consecutive pieces of `piece` (the last one shorter) of [0, n), each
  // taken by the next free thread, the calling one too; returns when all are done. For work where each
  // element's result does not depend on the thread or the piece (a matrix product's output rows): a thread
  // that the machine's other tenants slow down takes fewer pieces instead of holding the others at the end.
  void parallel_for_pieces(int64_t n, int64_t piece, FunctionRef<void(int64_t, int64_t, int)> fn);

  // The share of [0, n) that thread t gets (static partition).
  static void share(int64_t n, int n_threads, int t, int64_t* begin, int64_t* end);

 private:
  void worker_loop(int index);
  // Starts the job on the workers, does thread 0's part and waits for the rest.
  void run(int64_t n, int64_t piece, FunctionRef<void(int64_t, int64_t, int)>& fn);
  // Thread t's part of the current job: its static share, or pieces until none is left.
  void work(int t);

  int n_threads_;
  std::vector<std::thread> workers_;
  FunctionRef<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_piece_ = 0;  // 0: static shares
  std::atomic<int64_t> next_piece_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace glacier
