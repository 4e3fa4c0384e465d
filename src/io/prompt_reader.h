// Reads a prompt file into PromptRecords: .txt (one prompt a line) or .jsonl (plain records or OpenAI
// batch request lines, detected per line). Bad lines become error records; the rest still load.
#pragma once
#include <string>
#include <vector>

#include "io/prompt_record.h"

namespace glacier::io {

// Throws InputError when the file as a whole cannot be used (missing, unreadable, unknown extension).
// An empty file gives an empty vector: whether that is an error is the caller's decision.
std::vector<PromptRecord> read_prompts(const std::string& path);

// Parses one non-blank line of a .jsonl file into `record` (whose line, index and format are preset);
// sets ok=false and error on any problem. Exposed so other readers (stdin, tests) share the rules.
void parse_jsonl_prompt_line(const std::string& path, const std::string& line_text, PromptRecord& record);

}  // namespace glacier::io
