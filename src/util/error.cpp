// Invariant failures: turned into InternalError with the location, so the app's boundary reports them.
#include "util/error.h"

namespace glacier {

void fail_invariant(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(std::string("internal error at ") + file + ":" + std::to_string(line) + ": " +
                      msg + " (" + expr + ")");
}

}  // namespace glacier
