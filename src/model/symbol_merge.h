// Greedy pair merging over a text's characters, the core that BPE (merge ranks) and SentencePiece
// (token scores) encoding share: the best adjacent pair merges first, until no pair can.
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace glacier::model {

// Byte count of the UTF-8 sequence a lead byte announces. Following bytes are not checked, and a
// stray continuation byte counts as one: this is how llama.cpp cuts text, and ids must match it.
inline size_t utf8_lead_length(unsigned char lead) {
  static const unsigned char kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// Cuts `text` into characters (utf8_lead_length), then repeatedly joins the adjacent pair with the
// lowest key, the leftmost among equal keys; `pair_key(left, right)` gives a pair's key, or nullopt
// when it does not merge (left and right are adjacent views into `text`). Returns the final pieces,
// views into `text`, in order.
template <typename Key, typename PairKey>
std::vector<std::string_view> merge_symbols(std::string_view text, PairKey&& pair_key) {
  // A run of bytes linked to its current neighbours; length 0 once merged into its left neighbour.
  struct Symbol {
    size_t begin = 0;
    size_t length = 0;
    int prev = -1;
    int next = -1;
  };
  // A pair that may merge. It goes stale when either side changes.
  struct Candidate {
    Key key;
    int left;
    int right;
    size_t length;
  };
  struct MergesLater {  // priority_queue's top() is the lowest key, then the leftmost pair
    bool operator()(const Candidate& a, const Candidate& b) const {
      if (a.key != b.key) return a.key > b.key;
      return a.left > b.left;
    }
  };

  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    Symbol s;
    s.begin = pos;
    s.length = std::min(utf8_lead_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
    s.prev = static_cast<int>(symbols.size()) - 1;
    pos += s.length;
    s.next = pos < text.size() ? static_cast<int>(symbols.size()) + 1 : -1;
    symbols.push_back(s);
  }
  auto at = [&](int i) -> Symbol& { return symbols[static_cast<size_t>(i)]; };

  std::priority_queue<Candidate, std::vector<Candidate>, MergesLater> queue;
  auto consider_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = at(left);
    const Symbol& r = at(right);
    const std::optional<Key> key = pair_key(text.substr(l.begin, l.length), text.substr(r.begin, r.length));
    if (key) queue.push(Candidate{*key, left, right, l.length + r.length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider_pair(i - 1, i);

  while (!queue.empty()) {
    const Candidate best = queue.top();
    queue.pop();
    Symbol& left = at(best.left);
    Symbol& right = at(best.right);
    // A merge only ever grows a left symbol or empties a right one, so unchanged lengths mean
    // the pair is still adjacent and still spells the candidate's merge.
    if (left.length == 0 || right.length == 0 || left.length + right.length != best.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) at(right.next).prev = best.left;
    consider_pair(left.prev, best.left);
    consider_pair(best.left, left.next);
  }

  for (int i = 0; i != -1; i = at(i).next) pieces.push_back(text.substr(at(i).begin, at(i).length));
  return pieces;
}

}  // namespace glacier::model
