// SentencePiece-style segmentation: start from UTF-8 characters, repeatedly merge the adjacent pair
// that forms the highest-scoring vocabulary token, then fall back to byte tokens for the rest.
#include "model/spm_tokenizer.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "model/symbol_merge.h"
#include "util/error.h"

namespace glacier::model {
namespace {

const std::string kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's visible space

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
  fill_pieces([](const std::string& text) { return replace_all(text, kSpaceMarker, " "); },
              [](const std::string& text) {  // the loader checked the "<0xNN>" form
                return std::string(1, static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4])));
              });

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
  // A pair merges when its concatenation is a token; higher scores first (so the key is the negated
  // score, exact for floats, and ties still go to the leftmost pair).
  const auto pieces = merge_symbols<float>(text, [&](std::string_view left, std::string_view right) {
    const int32_t id = vocab_.find(std::string_view(left.data(), left.size() + right.size()));
    return id >= 0 ? std::optional<float>(-vocab_.score(id)) : std::nullopt;
  });

  // Every merged symbol spells a token, so only single characters can be missing from the
  // vocabulary; those become byte tokens.
  for (const std::string_view piece : pieces) {
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
