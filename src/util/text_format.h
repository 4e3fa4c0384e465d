// printf-style formatting into a std::string, for one-line messages built from numbers and names (the
// watchdogs' reports of a stalled rank).
#pragma once
#include <cstdio>
#include <string>

namespace glacier {

// At most 1023 characters: longer text is cut, which a one-line message never reaches.
template <typename... Args>
std::string format_line(const char* fmt, Args... args) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace glacier
