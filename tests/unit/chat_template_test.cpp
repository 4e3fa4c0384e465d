// Chat prompt rendering: each format against text written by hand from the format's definition, template
// detection from short Jinja snippets, template names, JSON message parsing and the errors for bad input.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "model/chat_template.h"

namespace glacier::model {
namespace {

// A system message, two user turns and one assistant turn: exercises every role and a second round.
const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "Name a color."},
};

using glacier::testing::expect_input_error;

// One format's rendering of kConversation, written by hand from the format's definition.
struct RenderCase {
  const char* name;
  ChatTemplate format;
  const char* bos;  // the vocabulary's BOS text, which some formats open with
  const char* expected;
};

void PrintTo(const RenderCase& c, std::ostream* os) { *os << c.name; }

const RenderCase kRenderCases[] = {
    {"ChatML", ChatTemplate::ChatML, "<s>",
     "<|im_start|>system\nYou are terse.<|im_end|>\n"
     "<|im_start|>user\nHi<|im_end|>\n"
     "<|im_start|>assistant\nHello!<|im_end|>\n"
     "<|im_start|>user\nName a color.<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Llama3", ChatTemplate::Llama3, "<|begin_of_text|>",
     "<|begin_of_text|>"
     "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Llama2", ChatTemplate::Llama2, "<s>",
     "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
     "<s>[INST] Name a color. [/INST]"},
    {"Mistral", ChatTemplate::Mistral, "<s>",
     "<s>[INST] You are terse.\n\nHi [/INST] Hello!</s>"
     "[INST] Name a color. [/INST]"},
    {"DeepSeek", ChatTemplate::DeepSeek, "<｜begin▁of▁sentence｜>",
     "<｜begin▁of▁sentence｜>You are terse."
     "<｜User｜>Hi"
     "<｜Assistant｜>Hello!<｜end▁of▁sentence｜>"
     "<｜User｜>Name a color."
     "<｜Assistant｜>"},
    // DeepSeek-V2-Chat's template: the system text as a paragraph, "User: " / "Assistant: " turns.
    {"DeepSeekV2", ChatTemplate::DeepSeek2, "<｜begin▁of▁sentence｜>",
     "<｜begin▁of▁sentence｜>You are terse.\n\n"
     "User: Hi\n\n"
     "Assistant: Hello!<｜end▁of▁sentence｜>"
     "User: Name a color.\n\n"
     "Assistant:"},
    // No system role: its text opens the first user turn; assistant turns are "model".
    {"Gemma", ChatTemplate::Gemma, "<bos>",
     "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n"
     "<start_of_turn>model\nHello!<end_of_turn>\n"
     "<start_of_turn>user\nName a color.<end_of_turn>\n"
     "<start_of_turn>model\n"},
    // Every role as its own turn, contents untrimmed; the generation prompt ends at <|end_of_role|>, as
    // granite-3.0-8b-instruct's tokenizer.chat_template writes it.
    {"Granite", ChatTemplate::Granite, "<s>",
     "<|start_of_role|>system<|end_of_role|>You are terse.<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hello!<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Name a color.<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
};

class ChatTemplateRender : public ::testing::TestWithParam<RenderCase> {};

TEST_P(ChatTemplateRender, RendersTheConversation) {
  const RenderCase& c = GetParam();
  EXPECT_EQ(render_chat(c.format, kConversation, c.bos), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Formats, ChatTemplateRender, ::testing::ValuesIn(kRenderCases),
                         [](const ::testing::TestParamInfo<RenderCase>& info) { return std::string(info.param.name); });

TEST(ChatTemplate, Llama3TrimsContent) {
  const std::vector<ChatMessage> messages = {{"user", " \n Hi there \t\n"}};
  const std::string expected =
      "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(render_chat(ChatTemplate::Llama3, messages, ""), expected);
}

TEST(ChatTemplate, RendersLlama2WithoutSystem) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(render_chat(ChatTemplate::Llama2, messages, "<s>"), "<s>[INST] Hi [/INST]");
}

// Beyond the conversation: contents are trimmed, and a system message needs a user turn to open.
TEST(ChatTemplate, RendersGemma) {
  EXPECT_EQ(render_chat(ChatTemplate::Gemma, {{"user", "  Hi \n"}}, ""),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  expect_input_error([] { render_chat(ChatTemplate::Gemma, {{"system", "Be brief."}}, ""); },
                     {"gemma", "user message"});
}

// Beyond the conversation: contents are not trimmed, and roles keep their order.
TEST(ChatTemplate, RendersGranite) {
  EXPECT_EQ(render_chat(ChatTemplate::Granite, {{"user", " Hi "}, {"system", "late"}}, ""),
            "<|start_of_role|>user<|end_of_role|> Hi <|end_of_text|>\n"
            "<|start_of_role|>system<|end_of_role|>late<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
}

TEST(ChatTemplate, DetectsFormatsFromJinjaMarkers) {
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                                 "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
            ChatTemplate::ChatML);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + "
                                 "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
                                 "'<|eot_id|>' }}{% endfor %}"),
            ChatTemplate::Llama3);
  EXPECT_EQ(detect_chat_template("{% if messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + "
                                 "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}"
                                 "{{ bos_token + '[INST] ' + sys + content + ' [/INST]' }}"),
            ChatTemplate::Llama2);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                                 "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
                                 "{{ message['content'] + eos_token }}{% endif %}{% endfor %}"),
            ChatTemplate::Mistral);
  EXPECT_EQ(detect_chat_template("{% if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}"
                                 "{% endif %}"),
            ChatTemplate::DeepSeek);
  EXPECT_EQ(detect_chat_template("{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"),
            ChatTemplate::DeepSeek);
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + "
                                 "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"),
            ChatTemplate::Gemma);
  EXPECT_EQ(detect_chat_template("{%- for message in messages %}{%- if message['role'] == 'user' %}"
                                 "{{- '<|start_of_role|>user<|end_of_role|>' + message['content'] + "
                                 "'<|end_of_text|>\n' }}{%- endif %}{%- endfor %}"),
            ChatTemplate::Granite);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                                 "{{ 'User: ' + message['content'] + '\\n\\n' }}{% elif message['role'] == 'assistant' %}"
                                 "{{ 'Assistant: ' + message['content'] + eos_token }}{% endif %}{% endfor %}"),
            ChatTemplate::DeepSeek2);
}

TEST(ChatTemplate, UnknownJinjaIsNotDetected) {
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{{ '### ' + message['role'] + ':\n' + "
                                 "message['content'] }}{% endfor %}"),
            std::nullopt);
  EXPECT_EQ(detect_chat_template(""), std::nullopt);
}

TEST(ChatTemplate, ParsesNamesAndRoundTrips) {
  for (ChatTemplate t : {ChatTemplate::ChatML, ChatTemplate::Llama3, ChatTemplate::Llama2, ChatTemplate::Mistral,
                         ChatTemplate::DeepSeek, ChatTemplate::DeepSeek2, ChatTemplate::Gemma,
                         ChatTemplate::Granite}) {
    EXPECT_EQ(parse_chat_template_name(chat_template_name(t)), t);
  }
  EXPECT_EQ(parse_chat_template_name("qwen"), ChatTemplate::ChatML);
  EXPECT_EQ(parse_chat_template_name("Llama3"), ChatTemplate::Llama3);
  expect_input_error([] { parse_chat_template_name("vicuna"); }, {"\"vicuna\"", "chatml", "deepseek"});
}

TEST(ChatTemplate, RejectsUnknownRole) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}, {"bot", "Hello"}};
  expect_input_error([&] { render_chat(ChatTemplate::ChatML, messages, ""); }, {"message 1", "\"bot\""});
}

TEST(ChatTemplate, RejectsEmptyConversation) {
  expect_input_error([] { render_chat(ChatTemplate::Llama3, {}, ""); }, {"empty"});
}

TEST(ChatTemplate, InstFormatsRequireAlternationEndingWithUser) {
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  expect_input_error([&] { render_chat(ChatTemplate::Llama2, two_users, "<s>"); }, {"message 1", "alternate"});

  const std::vector<ChatMessage> ends_with_assistant = {{"user", "a"}, {"assistant", "b"}};
  expect_input_error([&] { render_chat(ChatTemplate::Mistral, ends_with_assistant, "<s>"); }, {"last message"});

  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  expect_input_error([&] { render_chat(ChatTemplate::DeepSeek, late_system, ""); }, {"message 2"});
}

TEST(ChatTemplate, ParsesJsonMessages) {
  const std::vector<ChatMessage> messages = parse_chat_messages(
      R"([{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}])");
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].role, "system");
  EXPECT_EQ(messages[0].content, "Be brief.");
  EXPECT_EQ(messages[1].role, "user");
  EXPECT_EQ(messages[1].content, "first\nsecond");
}

TEST(ChatTemplate, RejectsMalformedJson) {
  expect_input_error([] { parse_chat_messages(R"([{"role": "user", "content": )"); },
                     {"chat messages JSON", "valid JSON"});

  expect_input_error([] { parse_chat_messages(R"({"role": "user", "content": "x"})"); }, {"expected an array"});

  expect_input_error([] { parse_chat_messages(R"([{"role": "user"}])"); }, {"element 0 key \"content\""});

  expect_input_error([] { parse_chat_messages(R"([{"role": 3, "content": "x"}])"); }, {"key \"role\""});

  expect_input_error(
      [] { parse_chat_messages(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])"); },
      {"part 0", "\"image_url\""});
}

}  // namespace
}  // namespace glacier::model
