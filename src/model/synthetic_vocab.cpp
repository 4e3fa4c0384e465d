// The built-in vocabulary of synthetic models: every word piece comes with all its prefixes, so the
// SentencePiece pair merges can always grow a word one character at a time, and a piece's score is
// its length (earlier entries winning ties), so longer pieces win.
#include "model/synthetic_vocab.h"

#include <array>
#include <unordered_set>

#include "util/error.h"

namespace glacier::model {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's visible space

constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeByte = 6;

// Words of simple stories, most common first; each becomes "▁word" with all its prefixes.
const char* const kWords[] = {
    "the", "a", "and", "to", "was", "he", "she", "it", "they", "of", "in", "his", "her", "with", "said",
    "on", "you", "I", "for", "that", "had", "not", "is", "at", "but", "so", "day", "there", "big", "very",
    "saw", "wanted", "little", "happy", "play", "were", "all", "did", "one", "time", "upon", "once", "who",
    "friend", "friends", "mom", "dad", "can", "go", "went", "be", "from", "up", "out", "help", "what", "do",
    "named", "like", "loved", "then", "when", "we", "are", "no", "have", "looked", "see", "felt", "around",
    "park", "fun", "my", "tree", "ball", "dog", "cat", "bird", "fish", "sun", "sky", "water", "home",
    "house", "toy", "girl", "boy", "sad", "good", "new", "red", "blue", "green", "bright", "sweet", "kind",
    "together", "always", "learned", "important", "smiled", "laughed", "found", "made", "came", "got",
    "thought", "asked", "told", "could", "would", "because", "after", "every", "something", "garden",
    "flower", "flowers", "love", "share", "sorry", "thank", "nice", "small", "other", "about", "this",
    "their", "them", "an", "how", "too", "into", "back", "down", "away", "over", "again", "just", "now",
    "Once", "The", "She", "He", "They", "One", "It", "Lily", "Tom", "Ben", "Mia", "Max", "Sam", "Anna",
    "Tim", "Sue", "Timmy", "Sara", "Lucy", "Jack", "Mom", "Dad", "But", "So", "When", "Then", "After",
    "morning", "night", "story", "king", "queen", "castle", "forest", "river", "sea", "boat", "car",
    "train", "cake", "apple", "food", "eat", "ate", "run", "ran", "jump", "jumped", "walk", "walked",
    "played", "ran", "climb", "swim", "sing", "dance", "read", "book", "school", "teacher", "class",
    "began", "heard", "noise", "scared", "brave", "strong", "tall", "long", "far", "near", "old",
};

// Pieces that follow a word without a space (endings, punctuation runs); also prefix-closed.
const char* const kInnerPieces[] = {
    "ing", "ed", "er", "ly", "es", "est", "ness", "ful", "tion", "ment", "able", "en", "ar", "or",
    "al", "le", "ow", "ay", "th", "he", "in", "an", "re", "on", "at", "it", "ou", "st", "nd", "ll",
    "ee", "oo", "ea", "ck", "sh", "ch", "'s", "n't", "'ll", "'re", "ve", "ie", "ies", "y", "s",
    ".\"", ",\"", "!\"", "?\"", "...",
};

const char* const kSingles[] = {
    ".", ",", "!", "?", "'", "\"", ":", ";", "-", "(", ")", "/", "&", "*",
};

// Syllables for padding pieces beyond the built-in list.
const char kConsonants[] = "bcdfghjklmnprstvwz";
const char kVowels[] = "aeiou";

class Builder {
 public:
  SyntheticVocab v;

  void add(const std::string& text, float score, int32_t type) {
    if (!seen_.insert(text).second) return;
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  // Score = length in characters ("▁" counts as one), minus a tie-break by position.
  void add_piece(const std::string& text) {
    if (seen_.count(text)) return;
    int chars = 0;
    for (unsigned char c : text) chars += (c & 0xC0) != 0x80;
    add(text, static_cast<float>(chars) - 1e-5f * static_cast<float>(v.tokens.size()), kTypeNormal);
  }
  // The piece and every prefix of it that ends on a character boundary, shortest first.
  void add_with_prefixes(const std::string& text) {
    for (size_t end = 1; end <= text.size(); ++end) {
      if (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) continue;
      add_piece(text.substr(0, end));
    }
  }
  bool contains(const std::string& text) const { return seen_.count(text) != 0; }

 private:
  std::unordered_set<std::string> seen_;
};

SyntheticVocab builtin_vocab() {
  Builder b;
  b.add("<unk>", 0.0f, kTypeUnknown);
  b.add("<s>", 0.0f, kTypeControl);
  b.add("</s>", 0.0f, kTypeControl);
  static const char kHex[] = "0123456789ABCDEF";
  for (int i = 0; i < 256; ++i) b.add(std::string{'<', '0', 'x', kHex[i >> 4], kHex[i & 15], '>'}, 0.0f, kTypeByte);
  b.add_piece(kSpace);
  for (char c = 'a'; c <= 'z'; ++c) b.add_piece(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) b.add_piece(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) b.add_piece(std::string(1, c));
  for (const char* s : kSingles) b.add_piece(s);
  for (char c = 'a'; c <= 'z'; ++c) b.add_piece(kSpace + c);
  for (char c = 'A'; c <= 'Z'; ++c) b.add_piece(kSpace + c);
  for (const char* w : kWords) b.add_with_prefixes(kSpace + w);
  for (const char* p : kInnerPieces) b.add_with_prefixes(p);
  return b.v;
}

}  // namespace

int32_t builtin_vocab_size() { return static_cast<int32_t>(builtin_vocab().tokens.size()); }

SyntheticVocab make_synthetic_vocab(int32_t n_vocab) {
  GLACIER_ASSERT(n_vocab >= SyntheticVocab::kMinSize, "synthetic vocabulary smaller than its special and byte tokens");
  SyntheticVocab base = builtin_vocab();
  const size_t n = static_cast<size_t>(n_vocab);
  if (base.tokens.size() >= n) {
    base.tokens.resize(n);
    base.scores.resize(n);
    base.types.resize(n);
    return base;
  }
  Builder b;
  for (size_t i = 0; i < base.tokens.size(); ++i) b.add(base.tokens[i], base.scores[i], base.types[i]);
  std::vector<std::string> syllables;
  for (const char* c = kConsonants; *c; ++c)
    for (const char* v = kVowels; *v; ++v) syllables.push_back(std::string{*c, *v});
  // Two syllables with and without the space marker, then three, ... until the size is reached.
  std::vector<std::string> stems = syllables;
  while (b.v.tokens.size() < n) {
    for (const std::string& stem : stems) {
      for (const std::string& piece : {kSpace + stem, stem}) {
        if (b.v.tokens.size() < n) b.add_piece(piece);
      }
    }
    std::vector<std::string> longer;
    for (const std::string& stem : stems) {
      if (b.v.tokens.size() + longer.size() >= 2 * n) break;  // enough candidates for the next round
      for (const std::string& s : syllables) longer.push_back(stem + s);
    }
    stems = std::move(longer);
  }
  return b.v;
}

}  // namespace glacier::model
