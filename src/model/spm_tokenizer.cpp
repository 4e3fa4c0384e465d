// SentencePiece-style segmentation: start from UTF-8 characters, repeatedly merge the adjacent pair
// that forms the highest-scoring vocabulary token, then fall back to byte tokens for the rest.
#include "model/spm_tokenizer.h"

#include <algorithm>
#include <queue>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace glacier::model {
namespace {

const std::string kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's visible space

// Byte count of the UTF-8 sequence a lead byte announces. Following bytes are not checked, and a
// stray continuation byte counts as one: this is how llama.cpp cuts text, and ids must match it.
size_t utf8_sequence_length(unsigned char lead) {
  static const unsigned char kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, pos)) {
    out.append(text.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// A run of bytes of the fragment being segmented, linked to its current neighbours.
struct Symbol {
  size_t begin = 0;
  size_t length = 0;  // 0 once merged into the symbol on its left
  int prev = -1;
  int next = -1;
};

// A pair of adjacent symbols whose concatenation is a token. It goes stale when either side changes.
struct MergeCandidate {
  float score = 0.0f;
  int left = -1;
  int right = -1;
  size_t length = 0;
};

// Orders the queue so that top() is the highest score, and among equal scores the leftmost pair.
struct LowerPriority {
  bool operator()(const MergeCandidate& a, const MergeCandidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

VocabDefaults SpmTokenizer::defaults() {
  VocabDefaults d;
  d.unk = 0;
  d.bos = 1;
  d.eos = 2;
  d.add_bos = true;
  d.add_eos = false;
  d.add_space_prefix = true;
  return d;
}

SpmTokenizer::SpmTokenizer(Vocab vocab) : VocabTokenizer(std::move(vocab)) {
  const int32_t n = vocab_.size();
  pieces_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab_.text(id);
    std::string& piece = pieces_[static_cast<size_t>(id)];
    switch (vocab_.type(id)) {
      case TokenType::Normal:
        piece = replace_all(text, kSpaceMarker, " ");
        break;
      case TokenType::Control:
      case TokenType::UserDefined:
      case TokenType::Unknown:
        piece = text;
        break;
      case TokenType::Byte:  // the loader checked the "<0xNN>" form
        piece.assign(1, static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4])));
        break;
      case TokenType::Unused:
      case TokenType::Undefined:
        break;
    }
  }

  static const char kHex[] = "0123456789ABCDEF";
  byte_tokens_.resize(256);
  for (int b = 0; b < 256; ++b) {
    const std::string name = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = vocab_.find(name);
    if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
    if (id < 0) id = vocab_.unk();
    byte_tokens_[static_cast<size_t>(b)] = id;
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  // llama.cpp puts the dummy-prefix space before the first text fragment and before every text
  // fragment that follows a special token (the references show "<s> x" parse as BOS, "▁", "▁x").
  bool after_special = true;
  for (const TextFragment& frag : vocab_.split_special(text, parse_special)) {
    if (frag.is_token) {
      out.push_back(frag.token);
      after_special = true;
      continue;
    }
    std::string escaped = (vocab_.add_space_prefix() && after_special) ? kSpaceMarker : std::string();
    escaped += replace_all(frag.text, " ", kSpaceMarker);
    encode_fragment(escaped, out);
    after_special = false;
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  return out;
}

void SpmTokenizer::encode_fragment(const std::string& text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    Symbol s;
    s.begin = pos;
    s.length = std::min(utf8_sequence_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
    s.prev = static_cast<int>(symbols.size()) - 1;
    pos += s.length;
    s.next = pos < text.size() ? static_cast<int>(symbols.size()) + 1 : -1;
    symbols.push_back(s);
  }

  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, LowerPriority> queue;
  auto consider_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = vocab_.find(std::string_view(text).substr(symbols[left].begin, length));
    if (id >= 0) queue.push(MergeCandidate{vocab_.score(id), left, right, length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider_pair(i - 1, i);

  while (!queue.empty()) {
    const MergeCandidate best = queue.top();
    queue.pop();
    Symbol& left = symbols[best.left];
    Symbol& right = symbols[best.right];
    // A merge only ever grows a left symbol or empties a right one, so unchanged lengths mean
    // the pair is still adjacent and still spells the candidate's token.
    if (left.length == 0 || right.length == 0 || left.length + right.length != best.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = best.left;
    consider_pair(left.prev, best.left);
    consider_pair(best.left, left.next);
  }

  // Every merged symbol spells a token, so only single characters can be missing from the
  // vocabulary; those become byte tokens.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = std::string_view(text).substr(symbols[i].begin, symbols[i].length);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
    } else {
      append_bytes(piece, out);
    }
  }
}

void SpmTokenizer::append_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  for (char c : bytes) {
    const int32_t id = byte_tokens_[static_cast<unsigned char>(c)];
    if (id < 0) {
      throw InputError(vocab_.source() + ": the vocabulary has no token for byte " +
                       std::to_string(static_cast<unsigned char>(c)) +
                       " (expected a byte token \"<0xNN>\" or an unknown token, found neither)");
    }
    out.push_back(id);
  }
}

}  // namespace glacier::model
