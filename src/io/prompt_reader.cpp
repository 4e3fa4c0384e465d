// File-level prompt reading: extension to format, BOM and CRLF handling, blank lines, per-line error
// isolation and duplicate ids. The JSON field rules live in prompt_json_line.cpp.
#include "io/prompt_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "io/utf8.h"
#include "util/error.h"

namespace glacier::io {
namespace {

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError("prompt file " + path + ": expected a file, found a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open prompt file " + path + ": " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw InputError("cannot read prompt file " + path + ": " + std::strerror(errno));
  return contents.str();
}

std::string lowercase_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

bool is_blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
}

void parse_text_line(const std::string& path, const std::string& line_text, PromptRecord& record) {
  record.format = PromptFormat::Text;
  if (auto bad = find_invalid_utf8(line_text)) {
    record.ok = false;
    record.error = path + ":" + std::to_string(record.line) + ": expected UTF-8 text, found an invalid byte 0x" +
                   [&] {
                     char hex[3];
                     std::snprintf(hex, sizeof hex, "%02X", static_cast<unsigned char>(line_text[*bad]));
                     return std::string(hex);
                   }() +
                   " at column " + std::to_string(*bad + 1);
    return;
  }
  record.prompt = line_text;
}

// The later of two records with one id becomes an error, so every output row has a unique id.
void mark_duplicate_ids(const std::string& path, std::vector<PromptRecord>& records) {
  std::unordered_map<std::string, int64_t> first_line;
  for (auto& r : records) {
    auto [it, inserted] = first_line.emplace(r.id, r.line);
    if (inserted || !r.ok) continue;
    r.ok = false;
    r.error = path + ":" + std::to_string(r.line) + ": \"id\": expected a unique id, found \"" + r.id +
              "\" already used on line " + std::to_string(it->second);
  }
}

}  // namespace

const char* prompt_format_name(PromptFormat format) {
  switch (format) {
    case PromptFormat::Text: return "text";
    case PromptFormat::Jsonl: return "jsonl";
    case PromptFormat::OpenAiBatch: return "openai-batch";
  }
  return "?";
}

std::vector<PromptRecord> read_prompts(const std::string& path) {
  const std::string ext = lowercase_extension(path);
  const bool is_text = ext == ".txt";
  if (!is_text && ext != ".jsonl" && ext != ".ndjson")
    throw InputError("prompt file " + path + ": expected extension .txt or .jsonl, found \"" + ext + "\"");

  std::string contents = read_whole_file(path);
  static constexpr std::string_view kBom = "\xEF\xBB\xBF";
  size_t pos = std::string_view(contents).starts_with(kBom) ? kBom.size() : 0;

  std::vector<PromptRecord> records;
  int64_t line_number = 0;
  while (pos < contents.size()) {
    size_t end = contents.find('\n', pos);
    if (end == std::string::npos) end = contents.size();
    std::string line_text = contents.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line_text.empty() && line_text.back() == '\r') line_text.pop_back();
    if (is_blank(line_text)) continue;

    PromptRecord record;
    record.line = line_number;
    record.index = static_cast<int64_t>(records.size());
    record.id = std::to_string(line_number);
    record.source_line = line_text;
    if (is_text)
      parse_text_line(path, line_text, record);
    else
      parse_jsonl_prompt_line(path, line_text, record);
    records.push_back(std::move(record));
  }
  mark_duplicate_ids(path, records);
  return records;
}

}  // namespace glacier::io
