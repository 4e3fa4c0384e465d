// The process's MPI lifetime: initialised once at the start of main (threads funnelled through the
// thread that calls MPI) and finalised when the session ends, so the programs need not include mpi.h.
#pragma once

namespace glacier::comm {

class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return rank_; }
  int world_size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace glacier::comm
