// The documented fields of an OpenAI batch output line (README, "OpenAI batch output"), checked field by
// field: names, types and the values that are fixed, for completions and chat, with and without logprobs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace glacier::testing {

struct OpenAiLineExpectation {
  bool chat = false;
  bool ok = true;              // a 200 response, else OpenAI's error shape
  bool logprobs = false;       // the request asked for log-probs
  int top_logprobs = 0;        // alternatives per token the request asked for
  size_t choices = 1;
  int prompt_logprobs = -1;    // the body's prompt_logprobs k (vLLM's extra field), -1 when absent
};

// Every way `line` differs from the documented shape; empty when it matches. Unknown keys count too.
std::vector<std::string> openai_line_problems(const nlohmann::json& line, const OpenAiLineExpectation& expect);

}  // namespace glacier::testing
