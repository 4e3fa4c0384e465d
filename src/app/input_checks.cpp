// Pre-load input checks: the prompt file against --mode, the chat template for "messages" records, and
// --threads against the host. The per-line rules stay in io/prompt_reader; this file judges the whole.
#include "app/input_checks.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/requests.h"
#include "io/prompt_reader.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

bool is_jsonl_name(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jsonl" || ext == ".ndjson";
}

// Perplexity reads the file as one text: present, a readable regular file, not JSON lines, not empty.
PromptFileFacts check_perplexity_text(const std::string& path) {
  if (is_jsonl_name(path))
    throw InputError("prompt file " + path + ": --mode perplexity scores a plain text file, found a .jsonl file "
                     "(its JSON would be scored as text)");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError("prompt file " + path + ": expected a text file, found no file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError("prompt file " + path + ": expected a regular text file, found something else (a directory?)");
  if (!std::ifstream(path, std::ios::binary))
    throw InputError("prompt file " + path + ": expected a readable text file, found one that cannot be opened: " +
                     std::strerror(errno));
  if (std::filesystem::file_size(path, ec) == 0)
    throw InputError("prompt file " + path + ": --mode perplexity needs text to score, found an empty file");
  return {1, std::nullopt};
}

}  // namespace

PromptFileFacts check_prompt_file(const JobOptions& o) {
  if (o.mode == JobMode::Perplexity) return check_perplexity_text(o.prompts);
  const std::vector<io::PromptRecord> records = io::read_prompts(o.prompts);  // throws for a missing file
  PromptFileFacts facts;
  facts.records = static_cast<int64_t>(records.size());
  if (records.empty()) {
    GLACIER_LOG_WARN("prompt file %s holds no prompts: the job will write empty results", o.prompts.c_str());
    return facts;
  }
  int64_t score = 0, other = 0;
  for (const io::PromptRecord& r : records) {
    if (!r.ok) continue;  // its own error row says why
    if (o.n > 1 && r.format == io::PromptFormat::OpenAiBatch)
      throw InputError("option --n: expected 1 for a prompt file of OpenAI batch lines (each takes its n from "
                       "\"body.n\", 1 when absent, as OpenAI's does), found " + std::to_string(o.n) +
                       " and a batch line at " + o.prompts + ":" + std::to_string(r.line));
    (r.is_score() ? score : other) += 1;
    if (r.is_chat() && !facts.first_chat_line) facts.first_chat_line = r.line;
  }
  const std::string counted = std::to_string(records.size()) + (records.size() == 1 ? " prompt" : " prompts");
  if (o.mode == JobMode::Score && score == 0 && other > 0)
    throw InputError("prompt file " + o.prompts + ": --mode score needs records with \"context\" and \"continuation\" "
                     "or \"continuations\", "
                     "found none among its " + counted + (is_jsonl_name(o.prompts) ? "" : " (a .txt file holds plain prompts)"));
  if (o.mode == JobMode::Generate && other == 0 && score > 0)
    throw InputError("prompt file " + o.prompts + ": --mode generate needs prompts to continue, found only "
                     "\"context\"/\"continuation(s)\" records among its " + counted + ": pass --mode score");
  return facts;
}

void check_chat_template(const JobOptions& o, const PromptFileFacts& facts,
                         const std::optional<std::string>& model_template_jinja) {
  if (!facts.first_chat_line || o.mode != JobMode::Generate) return;
  const ChatSetup chat = choose_chat_template(o, model_template_jinja);
  if (!chat.chat_template)
    throw InputError(o.prompts + ":" + std::to_string(*facts.first_chat_line) + ": \"messages\" needs a chat template, but " +
                     chat.unavailable_reason);
}

void check_threads(const JobOptions& o, int host_hardware_threads, const std::string& host) {
  if (o.threads <= host_hardware_threads || o.oversubscribe_threads) return;
  throw InputError("option --threads: expected at most the " + std::to_string(host_hardware_threads) +
                   " hardware threads of host " + host + " (or --oversubscribe-threads), found " +
                   std::to_string(o.threads));
}

}  // namespace glacier::app
