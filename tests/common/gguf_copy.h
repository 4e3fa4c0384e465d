// Test helper for edited copies of a GGUF file: put a file's keys and tensors into a Writer (leaving one
// out when asked), so a test can change, add or drop what it is about and write the copy.
#pragma once
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace glacier::testing {

// Every metadata key of `from` with its value, in file order, except the key named `except`.
void copy_keys(const gguf::File& from, gguf::Writer& to, const std::string& except = "");

// Every tensor of `from` (name, type, shape and bytes), in file order, except the tensor named `except`.
void copy_tensors(const gguf::File& from, gguf::Writer& to, const std::string& except = "");

}  // namespace glacier::testing
