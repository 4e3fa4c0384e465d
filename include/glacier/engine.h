// glacier's embeddable API: open a GGUF model in this process and run a batch of requests through it,
// getting each result by callback. No MPI and no files beyond the model; the engine is the one the
// glacier_mpi program runs (same kernels, scheduler, tokenizer and sampling), so results match its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace glacier {

// Thrown by Engine::open for a model that cannot be used (the message names the file, the key or the
// tensor, what was expected and what was found) or options out of range (the message names the option).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EngineOptions {
  int threads = 0;      // compute threads; 0 = every hardware thread of the host
  int context = 0;      // positions a sequence may hold; 0 = the model's training context, at most 4096
  int slots = 4;        // sequences computed together (each holds a KV cache of `context` positions)
  int ubatch = 512;     // prompt tokens a step computes at most
  bool prefix_sharing = true;  // requests reuse the KV rows of a prefix another one computed (same results)
};

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// One request. Give exactly one input: `prompt` (text, tokenized as the model's tokenizer does, with
// its BOS), `prompt_tokens` (ids, used as they are), `messages` (rendered with the model's chat
// template), or `context` + `continuation` (scoring: the continuation's log-probs given the context).
// Unset sampling fields take glacier_mpi's defaults (greedy, 128 tokens). Alternatively `json` holds one
// line of a JSONL prompt file, with every field glacier_mpi's prompt files take; the typed fields must
// then stay unset. Bad fields fail that request's result (ok == false, the error names the field).
struct Request {
  std::string id;  // echoed in its results; empty = its 1-based position in the batch
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_tokens;
  std::optional<std::vector<ChatMessage>> messages;
  std::optional<std::string> context;
  std::optional<std::string> continuation;

  std::optional<int> max_tokens;
  std::optional<double> temperature;
  std::optional<int> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<uint64_t> seed;
  std::optional<std::vector<std::string>> stop;
  std::optional<int> n;             // samples of this prompt, sharing one prefill (one result each)
  std::optional<int> top_logprobs;  // alternatives per generated token, 0..20

  std::string json;
};

struct Result {
  std::string id;
  size_t index = 0;   // the request's position in the batch
  int sample = 0;     // which of the request's n samples (0..n-1)
  bool ok = true;
  std::string error;  // when !ok
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated (scoring: the continuation's tokens)
  std::string text;             // the generated text as bytes (may end inside a UTF-8 character)
  std::vector<float> logprobs;  // natural-log probability of each token in `tokens`
  // top_logprobs alternatives per generated token, best first, row-major [tokens x top_logprobs].
  int top_logprobs = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_values;
  std::string finish_reason;  // "length" | "stop" | "error" ("" for scoring)
  // Scoring: the continuation's summed log-prob, and whether greedy decoding reproduces it.
  double sum_logprob = 0.0;
  bool greedy = false;
};

struct ModelInfo {
  std::string architecture;  // general.architecture, e.g. "llama"
  int n_layer = 0;
  int n_vocab = 0;
  int n_embd = 0;
  int context = 0;  // positions a sequence may hold in this engine
};

class Engine {
 public:
  // Maps and checks the model (every tensor, key and value) and allocates the KV cache. Throws Error.
  static std::unique_ptr<Engine> open(const std::string& model_path, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs the batch to the end; `on_result` is called on this thread as each sequence finishes (in
  // finishing order: `index` and `sample` say which it answers), exactly once per request and sample.
  // One run at a time per engine.
  void run(const std::vector<Request>& requests, const std::function<void(Result&&)>& on_result);

  ModelInfo info() const;
  // The model's tokenizer: text to ids (with its BOS when add_special), and ids back to text bytes.
  std::vector<int32_t> tokenize(const std::string& text, bool add_special = true) const;
  std::string detokenize(const std::vector<int32_t>& tokens) const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace glacier
