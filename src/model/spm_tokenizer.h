// SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama"): greedy highest-score pair
// merging over UTF-8 characters with byte fallback, matching llama.cpp's SPM tokenizer.
#pragma once
#include <string>
#include <vector>

#include "model/vocab.h"
#include "model/vocab_tokenizer.h"

namespace glacier::model {

class SpmTokenizer final : public VocabTokenizer {
 public:
  // Defaults llama.cpp assumes for an SPM vocabulary whose file leaves the keys out.
  static VocabDefaults defaults();

  explicit SpmTokenizer(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;



 private:
  // Segments one fragment whose spaces are already "▁" and appends the ids.
  void encode_fragment(const std::string& text, std::vector<int32_t>& out) const;
  // Appends the byte tokens for bytes no token covers.
  void append_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  std::vector<int32_t> byte_tokens_;  // id standing for each byte value (-1: none, use unk)
};

}  // namespace glacier::model
