// The scheduler's prefix index: for every KV slot, the token ids whose rows it holds (written, or sent
// in a micro-batch ahead of any later one), so a new prompt can start from the longest common prefix
// already computed in the job, and the choice of which free slot's rows to give up when one is needed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace glacier::pipeline {

class PrefixIndex {
 public:
  explicit PrefixIndex(int32_t n_slots);

  // The slot keeps the rows of its first n tokens only (its later positions are to be overwritten).
  void truncate(int32_t slot, int32_t n);
  // Rows of `tokens` at the slot's next positions have been sent.
  void append(int32_t slot, std::span<const int32_t> tokens);
  // dst's first n rows are now src's (a slot copy was sent); dst keeps nothing beyond them.
  void copy_prefix(int32_t src, int32_t dst, int32_t n);
  int32_t length(int32_t slot) const { return static_cast<int32_t>(slots_[static_cast<size_t>(slot)].tokens.size()); }
  const std::vector<int32_t>& tokens(int32_t slot) const { return slots_[static_cast<size_t>(slot)].tokens; }
  // Marks the slot's rows as used now (the least recently used free slot is evicted first).
  void touch(int32_t slot);

  struct Match {
    int32_t slot = -1;   // -1: no slot shares a token with the prompt
    int32_t length = 0;  // tokens in common, at most the limit asked for
  };
  // The slot among `candidates` whose rows share the longest prefix with `prompt`, counted up to
  // `limit` tokens (ties: the most recently used, then the first listed).
  Match longest(std::span<const int32_t> prompt, int32_t limit, std::span<const int32_t> candidates) const;
  // The candidate whose rows are least worth keeping: the fewest rows no other slot also holds (an empty
  // slot, or a prompt whose preamble another slot keeps), then the least recently used.
  int32_t victim(std::span<const int32_t> candidates) const;

 private:
  // Per slot, its rows beyond the longest prefix some other slot shares with it.
  std::vector<int32_t> unique_lengths() const;
  struct Slot {
    std::vector<int32_t> tokens;
    uint64_t last_used = 0;
  };
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

// Tokens two sequences share from the start, at most `limit`.
int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b, int32_t limit);

}  // namespace glacier::pipeline
