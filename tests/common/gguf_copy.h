// Test helper for edited copies of a GGUF file: put a file's keys and tensors into a Writer (leaving one
// out when asked), so a test can change, add or drop what it is about and write the copy; and what
// loading such a copy as a model says.
#pragma once
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace glacier::testing {

// Every metadata key of `from` with its value, in file order, except the key named `except`.
void copy_keys(const gguf::File& from, gguf::Writer& to, const std::string& except = "");

// Every tensor of `from` (name, type, shape and bytes), in file order, except the tensor named `except`.
void copy_tensors(const gguf::File& from, gguf::Writer& to, const std::string& except = "");

// What reading the model config of the file at path and loading every layer throws (an InputError's
// message), or "" when it loads.
std::string model_load_refusal(const std::string& path);

}  // namespace glacier::testing
