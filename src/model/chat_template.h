// Turns a conversation (system/user/assistant messages) into the prompt text a chat-tuned model expects,
// for the few prompt formats glacier-mpi knows, and recognizes which one a GGUF file's Jinja template uses.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace glacier::model {

struct ChatMessage {
  std::string role;
  std::string content;
};

enum class ChatTemplate { ChatML, Llama3, Llama2, Mistral, DeepSeek, DeepSeek2, Gemma, Granite };

// Names: "chatml" (also "qwen"), "llama3", "llama2", "mistral", "deepseek" (V3/R1), "deepseek2" (V2/V2.5),
// "gemma", "granite"
// (case-insensitive).
// Throws InputError listing the known names.
ChatTemplate parse_chat_template_name(const std::string& name);
const char* chat_template_name(ChatTemplate t);
// The names parse_chat_template_name takes, as messages list them.
const char* chat_template_names();

// The format a tokenizer.chat_template Jinja text implements, judged by its distinctive special-token
// markers; nullopt when none matches (the caller asks the user for --chat-template).
std::optional<ChatTemplate> detect_chat_template(const std::string& jinja);

// The conversation followed by the opening of the assistant's turn. bos_text is the BOS token's text
// ("<s>", "<|begin_of_text|>", ...) for formats that write it; pass "" when the tokenizer adds BOS itself.
// Throws InputError for an empty list, a role the format cannot express, or (Llama2/Mistral) a
// conversation that does not alternate user/assistant and end with a user turn.
std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const std::string& bos_text);

// Parses a JSON array of {"role": ..., "content": ...}; content is a string or a list of
// {"type": "text", "text": ...} parts, joined with "\n". Throws InputError naming the element and key.
std::vector<ChatMessage> parse_chat_messages(const std::string& json_array);

}  // namespace glacier::model
