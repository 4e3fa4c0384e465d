// The checks of a job's inputs that need no model weights, run before the model loads so that a bad
// prompt file, thread count or chat setup fails in a second instead of after minutes of loading.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "app/options.h"

namespace glacier::app {

// What the prompt check learned that the model's metadata must still satisfy.
struct PromptFileFacts {
  int64_t records = 0;
  std::optional<int64_t> first_chat_line;  // a valid "messages" record (needs a chat template)
};

// Rank 0: the prompt file exists, is readable, holds something (an empty file is only warned about,
// except in perplexity mode, which has nothing to score) and its format suits --mode: perplexity reads
// plain text, not .jsonl; score needs context/continuation records; generate needs records it can
// generate from. Throws InputError naming the file.
PromptFileFacts check_prompt_file(const JobOptions& o);

// Rank 0, once the model's metadata is open: a file with "messages" records needs a chat template, from
// --chat-template or recognized in the model's tokenizer.chat_template. Throws InputError naming the
// file, the first such line and what to pass.
void check_chat_template(const JobOptions& o, const PromptFileFacts& facts,
                         const std::optional<std::string>& model_template_jinja);

// Every rank, on its own host: --threads no more than the host's hardware threads unless
// --oversubscribe-threads (each thread past them only adds switching). Throws InputError.
void check_threads(const JobOptions& o, int host_hardware_threads, const std::string& host);

}  // namespace glacier::app
