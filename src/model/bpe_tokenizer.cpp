// Byte-level BPE: each pre-token's bytes become characters of GPT-2's printable alphabet, then the
// adjacent pair with the lowest merge rank is joined until none is left; pieces reverse the alphabet.
#include "model/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "gguf/gguf_file.h"
#include "model/symbol_merge.h"
#include "util/error.h"

namespace glacier::model {
namespace {

const char* const kPreKey = "tokenizer.ggml.pre";
const char* const kMergesKey = "tokenizer.ggml.merges";

// Bytes GPT-2 leaves as the character of the same number: the printable Latin-1 ones.
bool is_self_mapped(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

std::string utf8_of(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    GLACIER_ASSERT(cp < 0x10000, "byte alphabet code points stay below U+0800");
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// The alphabet's character for each byte: itself when printable, else U+0100 + n for the n-th
// other byte in increasing order.
std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) cps[static_cast<size_t>(b)] = is_self_mapped(b) ? static_cast<uint32_t>(b) : next++;
  return cps;
}

// The code point of a two-byte UTF-8 character (the only lengths the byte alphabet uses besides one).
std::optional<uint32_t> two_byte_code_point(std::string_view ch) {
  if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 0x80) return static_cast<unsigned char>(ch[0]);
  if (ch.size() != 2 || (static_cast<unsigned char>(ch[1]) & 0xC0) != 0x80) return std::nullopt;
  return ((static_cast<uint32_t>(static_cast<unsigned char>(ch[0])) & 0x1F) << 6) |
         (static_cast<unsigned char>(ch[1]) & 0x3F);
}

}  // namespace

VocabDefaults BpeTokenizer::defaults(PreTokenizerKind kind) {
  VocabDefaults d;
  d.bos = 11;  // llama.cpp's fallback for a BPE file without BOS/EOS ids
  d.eos = 11;
  d.unk = -1;
  d.add_bos = kind == PreTokenizerKind::Llama3;
  d.add_eos = false;
  d.add_space_prefix = false;
  return d;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const gguf::File& file) {
  const std::string pre = file.find_string(kPreKey).value_or("gpt-2");
  const std::optional<PreTokenizerKind> kind = pretokenizer_kind(pre);
  if (!kind) {
    throw InputError(file.path() + ": key '" + kPreKey + "': expected one of " + supported_pretokenizer_names() +
                     ", found \"" + pre + "\" (not supported)");
  }
  if (!file.find(kMergesKey)) {
    throw InputError(file.path() + ": key '" + kMergesKey +
                     "' is missing (expected the BPE merges of a \"gpt2\" tokenizer)");
  }
  const std::vector<std::string> merges = file.get_string_array(kMergesKey);
  return std::make_unique<BpeTokenizer>(Vocab::load(file, defaults(*kind)), merges, *kind);
}

BpeTokenizer::BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizerKind kind)
    : VocabTokenizer(std::move(vocab)),
      kind_(kind),
      pre_(PreTokenizer::get(kind)),
      ignore_merges_(kind == PreTokenizerKind::Llama3) {
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t space = m.empty() ? std::string::npos : m.find(' ', 1);
    if (space == std::string::npos || space + 1 == m.size()) {
      throw InputError(vocab_.source() + ": key '" + kMergesKey + "': expected \"left right\" (two symbols " +
                       "separated by a space) in element " + std::to_string(i) + ", found \"" + m + "\"");
    }
    ranks_.emplace(m, static_cast<int32_t>(i));  // a repeated merge keeps its first (best) rank
  }

  const std::array<uint32_t, 256> cps = byte_code_points();
  std::unordered_map<uint32_t, char> byte_of;
  for (size_t b = 0; b < 256; ++b) {
    byte_chars_[b] = utf8_of(cps[b]);
    byte_of[cps[b]] = static_cast<char>(b);
  }

  // Characters outside the byte alphabet (hand-made vocabularies) stand for themselves; byte tokens
  // render nothing in a BPE vocabulary, as in llama.cpp.
  fill_pieces(
      [&byte_of](const std::string& text) {
        std::string piece;
        for (size_t pos = 0; pos < text.size();) {
          const size_t len = std::min(utf8_lead_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
          const std::string_view ch = std::string_view(text).substr(pos, len);
          const std::optional<uint32_t> cp = two_byte_code_point(ch);
          const auto it = cp ? byte_of.find(*cp) : byte_of.end();
          if (it != byte_of.end()) {
            piece.push_back(it->second);
          } else {
            piece.append(ch);
          }
          pos += len;
        }
        return piece;
      },
      [](const std::string&) { return std::string(); });
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  for (const TextFragment& frag : vocab_.split_special(text, parse_special)) {
    if (frag.is_token) {
      out.push_back(frag.token);
      continue;
    }
    for (const std::string& word : pre_.split(frag.text)) {
      std::string mapped;
      mapped.reserve(word.size() * 2);
      for (char c : word) mapped += byte_chars_[static_cast<unsigned char>(c)];
      encode_word(mapped, out);
    }
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  return out;
}

int32_t BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
  // Merges are split at their first space after the first byte, so such a left side never merges.
  if (left.find(' ', 1) != std::string_view::npos) return -1;
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(1, ' ').append(right);
  const auto it = ranks_.find(std::string_view(key));
  return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t whole = vocab_.find(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // Lower ranks merge first.
  const auto pieces = merge_symbols<int32_t>(word, [&](std::string_view left, std::string_view right) {
    const int32_t rank = merge_rank(left, right);
    return rank >= 0 ? std::optional<int32_t>(rank) : std::nullopt;
  });
  for (const std::string_view piece : pieces) {
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A symbol without a token: llama.cpp looks its bytes up one by one and drops those it cannot find.
    for (char c : piece) {
      const int32_t byte_id = vocab_.find(std::string_view(&c, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace glacier::model
