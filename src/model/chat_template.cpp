// Chat prompt rendering for the ChatML, Llama 3, Llama 2, Mistral, DeepSeek (V3 and V2), Gemma and Granite formats, their detection
// from Jinja template text, and parsing of an OpenAI-style JSON message list.
#include "model/chat_template.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace glacier::model {
namespace {

constexpr const char* kKnownNames = "chatml (or qwen), llama3, llama2, mistral, deepseek, deepseek2, gemma, granite";

// DeepSeek's special tokens use fullwidth vertical bars (U+FF5C) and a lower one-eighth block (U+2581).
constexpr const char* kDeepSeekUser = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
constexpr const char* kDeepSeekAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";
constexpr const char* kDeepSeekEnd = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

bool contains(const std::string& text, const char* marker) { return text.find(marker) != std::string::npos; }

std::string trim_whitespace(const std::string& s) {
  auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto first = std::find_if_not(s.begin(), s.end(), is_space);
  auto last = std::find_if_not(s.rbegin(), s.rend(), is_space).base();
  return first < last ? std::string(first, last) : std::string();
}

std::string describe(ChatTemplate t) { return std::string("chat template ") + chat_template_name(t); }

// Every format here knows exactly these three roles; anything else would be silently misrendered.
void check_roles(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw InputError(describe(t) + ": expected at least one message, found an empty list");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw InputError(describe(t) + ": message " + std::to_string(i) + " has role \"" + role +
                       "\"; expected \"system\", \"user\" or \"assistant\"");
    }
  }
}

// Formats with a single system prompt slot at the start cannot place a later system message.
void check_system_only_first(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i].role == "system") {
      throw InputError(describe(t) + ": message " + std::to_string(i) +
                       " has role \"system\"; this format allows a system message only as message 0");
    }
  }
}

// [INST] formats pair each user turn with the following assistant turn, and the generation prompt is
// the close of the last [INST] block, so the turns must alternate and end with the user.
void check_alternating(ChatTemplate t, const std::vector<ChatMessage>& messages, size_t start) {
  if (start == messages.size()) {
    throw InputError(describe(t) + ": expected a user message after the system message, found none");
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const char* expected = (i - start) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      throw InputError(describe(t) + ": message " + std::to_string(i) + " has role \"" + messages[i].role +
                       "\"; expected \"" + expected + "\" (roles must alternate user/assistant)");
    }
  }
  if (messages.back().role != "user") {
    throw InputError(describe(t) + ": the last message has role \"assistant\"; expected a user message to answer");
  }
}

// Checks messages for an [INST] format and returns the index of the first turn: 1 after a leading
// system message (which the format folds into that turn), else 0.
size_t first_inst_turn(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  check_system_only_first(t, messages);
  const size_t start = messages.front().role == "system" ? 1 : 0;
  check_alternating(t, messages, start);
  return start;
}

// Formats whose every turn, system turns included, is OPEN role SEP content CLOSE, and whose generation
// prompt opens an assistant turn (OPEN "assistant" SEP).
struct RoleTurns {
  const char* open;
  const char* sep;
  const char* close;
  bool trim_content;  // contents trimmed of surrounding whitespace
};

constexpr RoleTurns kChatMLTurns = {"<|im_start|>", "\n", "<|im_end|>\n", false};
constexpr RoleTurns kLlama3Turns = {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", true};
// IBM Granite 3: every turn <|start_of_role|>ROLE<|end_of_role|>CONTENT<|end_of_text|> and a newline, system
// turns anywhere, contents as given. The generation prompt ends at <|end_of_role|> as the model's own template
// (tokenizer.chat_template) writes it; llama.cpp's built-in rendering adds a newline there that the template
// does not have, and the template is what the model was tuned on.
constexpr RoleTurns kGraniteTurns = {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n", false};

// `start`: the text before the first turn (Llama 3's BOS text; ChatML and Granite write none).
std::string render_role_turns(const RoleTurns& t, const std::vector<ChatMessage>& messages, const std::string& start) {
  std::string out = start;
  for (const ChatMessage& m : messages)
    out += t.open + m.role + t.sep + (t.trim_content ? trim_whitespace(m.content) : m.content) + t.close;
  out += std::string(t.open) + "assistant" + t.sep;
  return out;
}

std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  const size_t start = first_inst_turn(ChatTemplate::Llama2, messages);
  const bool has_system = start == 1;

  std::string out = bos_text + "[INST] ";
  if (has_system) out += "<<SYS>>\n" + messages.front().content + "\n<</SYS>>\n\n";
  out += messages[start].content + " [/INST]";
  // Later turns start a fresh sequence with a literal "<s>", which the model saw in training even when
  // the caller lets the tokenizer add the first BOS.
  for (size_t i = start + 1; i < messages.size(); ++i) {
    if (messages[i].role == "assistant") {
      out += " " + messages[i].content + " </s>";
    } else {
      out += "<s>[INST] " + messages[i].content + " [/INST]";
    }
  }
  return out;
}

std::string render_mistral(const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  const size_t start = first_inst_turn(ChatTemplate::Mistral, messages);
  const bool has_system = start == 1;

  std::string out = bos_text;
  for (size_t i = start; i < messages.size(); ++i) {
    if (messages[i].role == "assistant") {
      out += " " + messages[i].content + "</s>";
    } else {
      out += "[INST] ";
      if (i == start && has_system) out += messages.front().content + "\n\n";
      out += messages[i].content + " [/INST]";
    }
  }
  return out;
}

std::string render_deepseek(const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  check_system_only_first(ChatTemplate::DeepSeek, messages);
  std::string out = bos_text;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      out += m.content;
    } else if (m.role == "user") {
      out += std::string(kDeepSeekUser) + m.content;
    } else {
      out += std::string(kDeepSeekAssistant) + m.content + kDeepSeekEnd;
    }
  }
  out += kDeepSeekAssistant;
  return out;
}

// DeepSeek V2 and V2.5 (the deepseek2 files before V3): "User: " and "Assistant: " turns, a system text as
// its own paragraph, end-of-sentence after each answer, as the model's template writes them.
std::string render_deepseek2(const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  std::string out = bos_text;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += "User: " + m.content + "\n\n";
    } else {
      out += "Assistant: " + m.content + kDeepSeekEnd;
    }
  }
  out += "Assistant:";
  return out;
}

// Gemma (1 and 2): <start_of_turn>user|model turns. Gemma has no system role: a system message 0 opens
// the first user turn, separated by a blank line, as llama.cpp renders it; contents are trimmed.
std::string render_gemma(const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  check_system_only_first(ChatTemplate::Gemma, messages);
  std::string out = bos_text, system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = trim_whitespace(m.content);
      continue;
    }
    const bool user = m.role == "user";
    out += std::string("<start_of_turn>") + (user ? "user" : "model") + "\n";
    if (user && !system.empty()) {
      out += system + "\n\n";
      system.clear();
    }
    out += trim_whitespace(m.content) + "<end_of_turn>\n";
  }
  if (!system.empty())
    throw InputError(describe(ChatTemplate::Gemma) + ": expected a user message after the system message (gemma "
                     "places the system text in the first user turn), found none");
  out += "<start_of_turn>model\n";
  return out;
}

std::string content_text(const nlohmann::json& content, size_t index) {
  const std::string where = "chat messages JSON: element " + std::to_string(index) + " key \"content\"";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw InputError(where + ": expected a string or a list of text parts, found " + content.type_name());
  }
  std::string joined;
  for (size_t p = 0; p < content.size(); ++p) {
    const nlohmann::json& part = content[p];
    const std::string part_where = where + " part " + std::to_string(p);
    if (!part.is_object()) throw InputError(part_where + ": expected an object, found " + part.type_name());
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text") {
      const std::string found = type == part.end() ? std::string("no \"type\"") : type->dump();
      throw InputError(part_where + ": expected \"type\": \"text\", found " + found);
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      const std::string found = text == part.end() ? std::string("no \"text\"") : text->type_name();
      throw InputError(part_where + ": expected a string \"text\", found " + found);
    }
    if (p > 0) joined += "\n";
    joined += text->get<std::string>();
  }
  return joined;
}

}  // namespace

ChatTemplate parse_chat_template_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "chatml" || lower == "qwen") return ChatTemplate::ChatML;
  if (lower == "llama3") return ChatTemplate::Llama3;
  if (lower == "llama2") return ChatTemplate::Llama2;
  if (lower == "mistral") return ChatTemplate::Mistral;
  if (lower == "deepseek") return ChatTemplate::DeepSeek;
  if (lower == "deepseek2") return ChatTemplate::DeepSeek2;
  if (lower == "gemma") return ChatTemplate::Gemma;
  if (lower == "granite") return ChatTemplate::Granite;
  throw InputError("chat template name: expected one of " + std::string(kKnownNames) + ", found \"" + name + "\"");
}

const char* chat_template_names() { return kKnownNames; }

const char* chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::ChatML: return "chatml";
    case ChatTemplate::Llama3: return "llama3";
    case ChatTemplate::Llama2: return "llama2";
    case ChatTemplate::Mistral: return "mistral";
    case ChatTemplate::DeepSeek: return "deepseek";
    case ChatTemplate::DeepSeek2: return "deepseek2";
    case ChatTemplate::Gemma: return "gemma";
    case ChatTemplate::Granite: return "granite";
  }
  GLACIER_ASSERT(false, "unhandled ChatTemplate value " + std::to_string(static_cast<int>(t)));
}

std::optional<ChatTemplate> detect_chat_template(const std::string& jinja) {
  // Checked from most to least specific marker: the [INST] formats share that token, and "<<SYS>>" is
  // what sets Llama 2 apart from Mistral.
  if (contains(jinja, "<|im_start|>")) return ChatTemplate::ChatML;
  if (contains(jinja, "<|start_header_id|>")) return ChatTemplate::Llama3;
  if (contains(jinja, kDeepSeekUser) || contains(jinja, kDeepSeekAssistant)) return ChatTemplate::DeepSeek;
  if (contains(jinja, "'Assistant: ' + message['content'] + eos_token")) return ChatTemplate::DeepSeek2;
  if (contains(jinja, "<start_of_turn>")) return ChatTemplate::Gemma;
  if (contains(jinja, "<|start_of_role|>")) return ChatTemplate::Granite;
  if (contains(jinja, "[INST]")) {
    return contains(jinja, "<<SYS>>") ? ChatTemplate::Llama2 : ChatTemplate::Mistral;
  }
  return std::nullopt;
}

std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const std::string& bos_text) {
  check_roles(t, messages);
  switch (t) {
    case ChatTemplate::ChatML: return render_role_turns(kChatMLTurns, messages, "");
    case ChatTemplate::Llama3: return render_role_turns(kLlama3Turns, messages, bos_text);
    case ChatTemplate::Llama2: return render_llama2(messages, bos_text);
    case ChatTemplate::Mistral: return render_mistral(messages, bos_text);
    case ChatTemplate::DeepSeek: return render_deepseek(messages, bos_text);
    case ChatTemplate::DeepSeek2: return render_deepseek2(messages, bos_text);
    case ChatTemplate::Gemma: return render_gemma(messages, bos_text);
    case ChatTemplate::Granite: return render_role_turns(kGraniteTurns, messages, "");
  }
  GLACIER_ASSERT(false, "unhandled ChatTemplate value " + std::to_string(static_cast<int>(t)));
}

std::vector<ChatMessage> parse_chat_messages(const std::string& json_array) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_array);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(std::string("chat messages JSON: expected valid JSON, found a syntax error: ") + e.what());
  }
  if (!doc.is_array()) {
    throw InputError(std::string("chat messages JSON: expected an array of messages, found ") + doc.type_name());
  }
  std::vector<ChatMessage> messages;
  messages.reserve(doc.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& item = doc[i];
    const std::string where = "chat messages JSON: element " + std::to_string(i);
    if (!item.is_object()) throw InputError(where + ": expected an object, found " + item.type_name());
    auto role = item.find("role");
    if (role == item.end() || !role->is_string()) {
      const std::string found = role == item.end() ? std::string("no such key") : role->type_name();
      throw InputError(where + " key \"role\": expected a string, found " + found);
    }
    auto content = item.find("content");
    if (content == item.end()) throw InputError(where + " key \"content\": expected a string, found no such key");
    messages.push_back({role->get<std::string>(), content_text(*content, i)});
  }
  return messages;
}

}  // namespace glacier::model
