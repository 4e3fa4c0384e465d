// Shared token lookups of the vocabulary-based tokenizers.
#include "model/vocab_tokenizer.h"

#include "util/error.h"

namespace glacier::model {

std::string VocabTokenizer::token_to_piece(int32_t id, bool special) const {
  check_id(id);
  const TokenType t = vocab_.type(id);
  if (!special && (t == TokenType::Control || t == TokenType::Unknown)) return {};
  return pieces_[static_cast<size_t>(id)];
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.text(id);
}

TokenType VocabTokenizer::token_type(int32_t id) const {
  check_id(id);
  return vocab_.type(id);
}

void VocabTokenizer::check_id(int32_t id) const {
  if (!vocab_.contains(id)) {
    std::string msg = vocab_.source();
    msg += ": token id ";
    msg += std::to_string(id);
    msg += " is out of range (expected 0..";
    msg += std::to_string(vocab_.size() - 1);
    msg += ")";
    throw InputError(msg);
  }
}

}  // namespace glacier::model
