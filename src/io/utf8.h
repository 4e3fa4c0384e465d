// UTF-8 checks for untrusted text: prompt lines must be valid, generated text (tokens may split a
// character) is repaired before it reaches a JSON or console consumer.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace glacier::io {

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are ill-formed), or nullopt when all of `text` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// `text` with every ill-formed sequence replaced by U+FFFD (one replacement per maximal bad prefix).
// The one repair rule of every output: the JSONL writer and the HDF5 string columns both apply it.
std::string replace_invalid_utf8(std::string_view text);

// replace_invalid_utf8, and a NUL byte also becomes U+FFFD: for stores of C strings (HDF5 strings),
// which would otherwise end at the NUL and silently drop the rest.
std::string replace_invalid_utf8_and_nul(std::string_view text);

}  // namespace glacier::io
