// Invariant failures: turned into InternalError with the location, so the app's boundary reports them.
#include "util/error.h"

namespace glacier {

void fail_invariant(const char* expr, const char* file, int line, const std::string& msg) {
  // Built with += : GCC 12 warns falsely (-Wrestrict) on long operator+ chains of std::string.
  std::string text = "internal error at ";
  text += file;
  text += ":";
  text += std::to_string(line);
  text += ": ";
  text += msg;
  text += " (";
  text += expr;
  text += ")";
  throw InternalError(text);
}

}  // namespace glacier
