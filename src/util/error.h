// Error types and always-on invariant checks shared by every module.
// Input errors carry a message that names the file, key or line, what was expected and what was found.
#pragma once
#include <stdexcept>
#include <string>

namespace glacier {

// Bad input from a user (model file, prompt file, options): reported, never a crash.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken internal invariant: a bug in glacier-mpi.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_invariant(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace glacier

// Always-on assert (also in Release builds): invariants are cheap next to a wrong answer.
#define GLACIER_ASSERT(cond, msg)                                          \
  do {                                                                     \
    if (!(cond)) ::glacier::fail_invariant(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
