// The one UTF-8 well-formedness rule (Unicode chapter 3's table of well-formed byte sequences),
// shared by the tokenizer's input sanitising and io's validation and repair of text.
#pragma once
#include <cstddef>
#include <string_view>

namespace glacier::util {

// The sequence starting at text[pos] (pos < text.size()): a whole well-formed sequence (valid, its
// length), or the longest prefix that could still have begun one (not valid, length >= 1), so a
// character cut short is one bad run ("maximal subpart"). Overlong forms, UTF-16 surrogates and code
// points past U+10FFFF are ill-formed.
struct Utf8Sequence {
  size_t length;
  bool valid;
};
Utf8Sequence scan_utf8_sequence(std::string_view text, size_t pos);

}  // namespace glacier::util
