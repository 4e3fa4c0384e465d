// Test helpers for refusals: run a call that must throw glacier::InputError and check what its message
// names. A call that throws nothing fails the test at the caller's line; any other exception escapes.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <source_location>
#include <string>
#include <string_view>

#include "util/error.h"

namespace glacier::testing {

// What the InputError fn throws says; a test failure (reported at the caller's line) and "" when it
// throws none.
template <typename Fn>
std::string input_error_message(Fn&& fn, std::source_location where = std::source_location::current()) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line())) << "expected an InputError, none was thrown";
  return "";
}

// Expects every fragment somewhere in message (each missing one is its own failure, printing the message).
inline void expect_mentions(const std::string& message, std::initializer_list<std::string_view> fragments,
                            std::source_location where = std::source_location::current()) {
  for (std::string_view fragment : fragments) {
    if (message.find(fragment) == std::string::npos) {
      ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
          << "'" << fragment << "' not in: " << message;
    }
  }
}

// fn must throw an InputError whose message holds every fragment.
template <typename Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string_view> fragments,
                        std::source_location where = std::source_location::current()) {
  expect_mentions(input_error_message(fn, where), fragments, where);
}

}  // namespace glacier::testing
