// Chooses the tokenizer implementation a GGUF file's tokenizer.ggml.model names, and the decoding
// every implementation shares.
#include "model/tokenizer.h"

#include <memory>
#include <optional>
#include <string>

#include "gguf/gguf_file.h"
#include "model/bpe_tokenizer.h"
#include "model/spm_tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"

namespace glacier::model {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  const char* const key = "tokenizer.ggml.model";
  const char* const supported = "\"llama\" (SentencePiece), \"gpt2\" (byte-level BPE)";
  const std::optional<std::string> model = file.find_string(key);
  if (!model) throw InputError(file.path() + ": key '" + key + "' is missing (expected one of " + supported + ")");
  if (*model == "llama") return std::make_unique<SpmTokenizer>(Vocab::load(file, SpmTokenizer::defaults()));
  if (*model == "gpt2") return BpeTokenizer::load(file);
  throw InputError(file.path() + ": key '" + key + "': expected one of " + supported + ", found \"" + *model +
                   "\" (not supported)");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string text;
  for (int32_t id : ids) text += token_to_piece(id, special);
  return text;
}

}  // namespace glacier::model
