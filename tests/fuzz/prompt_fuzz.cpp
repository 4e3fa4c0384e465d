// Fuzzes the prompt file reader (io::read_prompts) on the input read as a .txt and as a .jsonl file
// (plain records and OpenAI batch lines), and the chat rendering of the messages it accepts. Checks
// that bad lines become error records, never exceptions, and the record invariants the engine relies on.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "io/prompt_reader.h"
#include "io/utf8.h"
#include "model/chat_template.h"
#include "util/error.h"

namespace {

using namespace glacier;

// read_prompts takes a path (it picks the format from the extension), so each input goes through a
// file in a private directory in /dev/shm (memory, not disk) that is removed at exit.
std::string g_scratch_dir;

void remove_scratch_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(g_scratch_dir, ignored);
}

[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "prompt_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

std::string write_input(const char* file_name, const uint8_t* data, size_t size) {
  const std::string path = g_scratch_dir + "/" + file_name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) violated("cannot write the fuzz input to " + path);
  return path;
}

void check_valid_utf8(const std::string& text, const std::string& what) {
  if (auto bad = io::find_invalid_utf8(text)) {
    violated(what + " is not valid UTF-8 (byte " + std::to_string(*bad) + "): " + io::replace_invalid_utf8(text));
  }
}

// Chat messages that the reader accepted render in every format or are refused with InputError.
void render_in_every_format(const std::string& messages_json) {
  std::vector<model::ChatMessage> messages;
  try {
    messages = model::parse_chat_messages(messages_json);
  } catch (const InputError& e) {
    violated(std::string("the reader accepted messages that parse_chat_messages refuses: ") + e.what());
  }
  for (auto format : {model::ChatTemplate::ChatML, model::ChatTemplate::Llama3, model::ChatTemplate::Llama2,
                      model::ChatTemplate::Mistral, model::ChatTemplate::DeepSeek}) {
    try {
      model::render_chat(format, messages, "<s>");
    } catch (const InputError&) {
    }
  }
}

void check_ok_record(const io::PromptRecord& r, const std::string& where) {
  if (!r.error.empty()) violated(where + ": ok record with an error message");
  const int n_inputs = int(r.prompt.has_value()) + int(r.prompt_token_ids.has_value()) +
                       int(r.messages_json.has_value()) + int(r.context.has_value());
  if (n_inputs != 1) violated(where + ": ok record with " + std::to_string(n_inputs) + " inputs");
  if (r.context.has_value() != r.continuation.has_value()) violated(where + ": context without continuation");
  if (r.continuation && r.continuation->empty()) violated(where + ": empty continuation");
  if (r.prompt) check_valid_utf8(*r.prompt, where + " prompt");
  if (r.prompt_token_ids) {
    if (r.prompt_token_ids->empty()) violated(where + ": empty prompt_token_ids");
    for (int32_t id : *r.prompt_token_ids)
      if (id < 0) violated(where + ": negative token id");
  }
  if (r.max_tokens && *r.max_tokens < 0) violated(where + ": negative max_tokens");
  if (r.top_k && *r.top_k < 0) violated(where + ": negative top_k");
  if (r.temperature && !(*r.temperature >= 0)) violated(where + ": temperature below 0");
  if (r.top_p && !(*r.top_p > 0 && *r.top_p <= 1)) violated(where + ": top_p outside (0, 1]");
  if (r.min_p && !(*r.min_p >= 0 && *r.min_p <= 1)) violated(where + ": min_p outside [0, 1]");
  if (r.format == io::PromptFormat::OpenAiBatch && (!r.custom_id || *r.custom_id != r.id))
    violated(where + ": batch line whose id is not its custom_id");
  if (r.messages_json) render_in_every_format(*r.messages_json);
}

void check_records(const std::vector<io::PromptRecord>& records, bool is_text) {
  std::set<std::string> ok_ids;
  int64_t previous_line = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const io::PromptRecord& r = records[i];
    const std::string where = std::string(is_text ? "txt" : "jsonl") + " record " + std::to_string(i);
    if (r.index != static_cast<int64_t>(i)) violated(where + ": index " + std::to_string(r.index));
    if (r.line <= previous_line) violated(where + ": line numbers do not increase");
    previous_line = r.line;
    if (r.id.empty()) violated(where + ": empty id");
    check_valid_utf8(r.id, where + " id");
    if (is_text != (r.format == io::PromptFormat::Text)) violated(where + ": format does not match the file");
    if (!r.ok) {
      if (r.error.empty()) violated(where + ": error record without a message");
      // Messages reach logs, JSON lines and HDF5 strings as they are.
      check_valid_utf8(r.error, where + " error message");
      continue;
    }
    check_ok_record(r, where);
    if (!ok_ids.insert(r.id).second) violated(where + ": id \"" + r.id + "\" used twice");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir_template[] = "/dev/shm/glacier_prompt_fuzz.XXXXXX";
  if (!mkdtemp(dir_template)) {
    std::perror("prompt_fuzz: mkdtemp in /dev/shm");
    std::abort();
  }
  g_scratch_dir = dir_template;
  std::atexit(remove_scratch_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* file_name : {"prompts.txt", "prompts.jsonl"}) {
    const std::string path = write_input(file_name, data, size);
    // A readable file of any content gives records; InputError would mean the reader gave up on the
    // whole file, which it promises only for missing or unreadable files.
    check_records(io::read_prompts(path), std::string(file_name).ends_with(".txt"));
  }
  return 0;
}
