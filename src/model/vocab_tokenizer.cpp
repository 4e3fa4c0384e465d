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

void VocabTokenizer::fill_pieces(const PieceOf& normal_piece, const PieceOf& byte_piece) {
  const int32_t n = vocab_.size();
  pieces_.assign(static_cast<size_t>(n), std::string());
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab_.text(id);
    std::string& piece = pieces_[static_cast<size_t>(id)];
    switch (vocab_.type(id)) {
      case TokenType::Normal:
        piece = normal_piece(text);
        break;
      case TokenType::Byte:
        piece = byte_piece(text);
        break;
      case TokenType::Control:
      case TokenType::UserDefined:
      case TokenType::Unknown:
        piece = text;
        break;
      case TokenType::Unused:
      case TokenType::Undefined:
        break;
    }
  }
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
