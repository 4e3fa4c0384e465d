// Text <-> token ids for the vocabulary stored in a GGUF file (tokenizer.ggml.*). The SentencePiece-
// style tokenizer (tokenizer.ggml.model = "llama") is one implementation; byte-level BPE is another.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_fwd.h"

namespace glacier::model {

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer the file's tokenizer.ggml.model names; throws InputError naming the file and
  // key for a missing, malformed or unsupported vocabulary.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // add_special: BOS (and EOS) as the vocabulary asks (tokenizer.ggml.add_bos_token, default per model).
  // parse_special: control tokens written in the text (e.g. "<s>") become their ids.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The bytes a token stands for (SentencePiece "▁" becomes a space, byte tokens their byte).
  // Control tokens give their text only when `special` is true.
  virtual std::string token_to_piece(int32_t id, bool special) const = 0;

  // Pieces of `ids` joined (special tokens rendered only when `special`).
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;          // -1 when the vocabulary has none
  virtual int32_t eos() const = 0;          // -1 when the vocabulary has none
  virtual bool add_bos() const = 0;         // whether encode(add_special) prepends BOS
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual const std::string& token_text(int32_t id) const = 0;  // the vocabulary's string for id
  virtual TokenType token_type(int32_t id) const = 0;
};

}  // namespace glacier::model
