// Test helpers for refusals: run a call that must throw glacier::InputError and check what its message
// names. A call that throws nothing fails the test at the caller's line (but for refusal_message, whose
// callers expect that too); any other exception escapes.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "util/error.h"

namespace glacier::testing {

// Each helper takes its caller's file and line as defaults evaluated where it is called (__builtin_FILE /
// __builtin_LINE): std::source_location would do the same, but clang 14 with libstdc++ 12 (the sanitizer
// build's compiler) does not provide it.

// What the InputError fn throws says; a test failure (reported at the caller's line) and "" when it
// throws none.
template <typename Fn>
std::string input_error_message(Fn&& fn, const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE()) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE_AT(caller_file, caller_line) << "expected an InputError, none was thrown";
  return "";
}

// What the InputError fn throws says, or "" when it throws none: for checks that may pass, where passing
// is itself an outcome to expect (compare with "").
template <typename Fn>
std::string refusal_message(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Expects every fragment somewhere in message (each missing one is its own failure, printing the message).
inline void expect_mentions(const std::string& message, std::initializer_list<std::string_view> fragments,
                            const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE()) {
  for (std::string_view fragment : fragments) {
    if (message.find(fragment) == std::string::npos) {
      ADD_FAILURE_AT(caller_file, caller_line)
          << "'" << fragment << "' not in: " << message;
    }
  }
}

// fn must throw an InputError whose message holds every fragment.
template <typename Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string_view> fragments,
                        const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE()) {
  expect_mentions(input_error_message(fn, caller_file, caller_line), fragments, caller_file, caller_line);
}

}  // namespace glacier::testing
