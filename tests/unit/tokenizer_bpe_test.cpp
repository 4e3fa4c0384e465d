// Byte-level BPE tokenizer on a tiny hand-made vocabulary written with gguf::Writer: merge order by
// rank, the GPT-2 byte alphabet, special tokens, pre-tokenizer regexes per family, flags and errors.
// Every expected id list below is worked out by hand from kTokens and kMerges (see each case).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/input_error.h"
#include "common/test_env.h"
#include "common/tokenizer_reference.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/pretokenizer.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace glacier::model {
namespace {

using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;

// Texts are in GPT-2's byte alphabet: "Ġ" (U+0120) is byte 0x20, "Ċ" (U+010A) byte 0x0A,
// "ġ" (U+0121) byte 0x7F, "Ń" (U+0143) byte 0xAD; "Ã" (U+00C3) and "©" (U+00A9) stand for themselves.
const std::vector<std::string> kTokens = {
    "a",        // 0
    "b",        // 1
    "c",        // 2
    "ab",       // 3
    "bc",       // 4
    "abc",      // 5 no merge builds it
    "\xC4\xA0",  // 6 "Ġ"
    "\xC4\xA0" "a",  // 7 "Ġa"
    "x",        // 8
    "xx",       // 9
    "\xC4\x8A",  // 10 "Ċ"
    "\xC3\x83",  // 11 "Ã"
    "\xC2\xA9",  // 12 "©"
    "\xC3\x83\xC2\xA9",  // 13 "Ã©" = bytes C3 A9 = "é"
    "<",        // 14
    "|",        // 15
    ">",        // 16
    "e",        // 17
    "n",        // 18
    "d",        // 19
    "<|end|>",  // 20 control
    "<tool>",   // 21 user-defined
    "<|bos|>",  // 22 control
    "\xC5\x83",  // 23 "Ń"
    "\xC4\xA1",  // 24 "ġ"
};

// Rank = position: lower merges first.
const std::vector<std::string> kMerges = {
    "b c",                  // 0
    "a b",                  // 1
    "\xC4\xA0 a",           // 2 "Ġ a"
    "x x",                  // 3
    "\xC3\x83 \xC2\xA9",    // 4 "Ã ©"
    "n d",                  // 5 "nd" is no token
};

std::vector<int32_t> token_types() {
  std::vector<int32_t> types(kTokens.size(), static_cast<int32_t>(TokenType::Normal));
  types[20] = static_cast<int32_t>(TokenType::Control);
  types[21] = static_cast<int32_t>(TokenType::UserDefined);
  types[22] = static_cast<int32_t>(TokenType::Control);
  return types;
}

// A writer holding the full valid vocabulary; tests change keys before writing.
gguf::Writer vocab_writer(const std::string& pre = "gpt-2") {
  gguf::Writer w;
  w.set_string("general.architecture", "gpt2");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", kTokens);
  w.set_i32_array("tokenizer.ggml.token_type", token_types());
  w.set_string_array("tokenizer.ggml.merges", kMerges);
  w.set_u32("tokenizer.ggml.bos_token_id", 22);
  w.set_u32("tokenizer.ggml.eos_token_id", 20);
  return w;
}

using testing::expect_mentions;
using testing::tokenizer_of;
using testing::vocab_refusal;

class BpeTokenizerTest : public testing::VocabTokenizerTest {
 protected:
  void SetUp() override { tok_ = tokenizer_of(vocab_writer(), "tokenizer_bpe_base"); }
};

TEST_F(BpeTokenizerTest, VocabularyFacts) {
  EXPECT_EQ(tok_->n_vocab(), static_cast<int32_t>(kTokens.size()));
  EXPECT_EQ(tok_->bos(), 22);
  EXPECT_EQ(tok_->eos(), 20);
  EXPECT_FALSE(tok_->add_bos());  // no add_bos_token key: GPT-2 style vocabularies add nothing
  EXPECT_EQ(tok_->token_type(21), TokenType::UserDefined);
  EXPECT_TRUE(tok_->is_end_of_generation(20));
}

// "abc": pairs (a,b) rank 1 and (b,c) rank 0; "b c" goes first although it is to the right. Then
// "a bc" is no merge, so the token "abc" is never reached: [a, bc].
TEST_F(BpeTokenizerTest, LowestRankMergesFirst) { EXPECT_EQ(plain("abc"), (Ids{0, 4})); }

// " ab" is one word Ġ a b: (a,b) rank 1 beats (Ġ,a) rank 2, then "Ġ ab" is no merge: [Ġ, ab].
TEST_F(BpeTokenizerTest, MergeRankBeatsPosition) { EXPECT_EQ(plain(" ab"), (Ids{6, 3})); }

// "xxx": both (x,x) pairs have rank 3; the left one merges: [xx, x].
TEST_F(BpeTokenizerTest, EqualRanksMergeLeftmostPair) { EXPECT_EQ(plain("xxx"), (Ids{9, 8})); }

// Bytes become alphabet characters before merging: " a" is Ġa, "\n" is Ċ, 0x7F is ġ, and the two
// bytes of "é" (C3 A9) are Ã and ©, which merge (rank 4).
TEST_F(BpeTokenizerTest, BytesMapToGpt2Alphabet) {
  EXPECT_EQ(plain(" a"), Ids{7});
  EXPECT_EQ(plain("\n"), Ids{10});
  EXPECT_EQ(plain("\x7F"), Ids{24});
  EXPECT_EQ(plain("\xC3\xA9"), Ids{13});
}

// "end": (n,d) merges (rank 5) into "nd", which is no token, so its bytes are looked up one by one:
// [e, n, d]. "z" has no token at all and is dropped, as llama.cpp does.
TEST_F(BpeTokenizerTest, SymbolsWithoutTokenFallBackToSingleBytes) {
  EXPECT_EQ(plain("end"), (Ids{17, 18, 19}));
  EXPECT_EQ(plain("zab"), Ids{3});
}

TEST_F(BpeTokenizerTest, EmptyTextAndAddSpecial) {
  EXPECT_EQ(plain(""), Ids{});
  EXPECT_EQ(tok_->encode("", true, false), Ids{});
}

// Without parse_special "a<|end|>b" is text: words a, <|, end, |>, b (GPT-2 regex) give
// [a, <, |, e, n, d, |, >, b]. With it the control token is cut out first: [a, <|end|>, b].
TEST_F(BpeTokenizerTest, ParseSpecialSplitsControlTokens) {
  EXPECT_EQ(plain("a<|end|>b"), (Ids{0, 14, 15, 17, 18, 19, 15, 16, 1}));
  EXPECT_EQ(tok_->encode("a<|end|>b", false, true), (Ids{0, 20, 1}));
}

// User-defined tokens are recognised even without parse_special.
TEST_F(BpeTokenizerTest, UserDefinedTokensAlwaysSplit) { EXPECT_EQ(plain("a<tool>b"), (Ids{0, 21, 1})); }

TEST_F(BpeTokenizerTest, PiecesReverseTheByteAlphabet) {
  EXPECT_EQ(tok_->token_to_piece(7, false), " a");
  EXPECT_EQ(tok_->token_to_piece(10, false), "\n");
  EXPECT_EQ(tok_->token_to_piece(13, false), "\xC3\xA9");
  EXPECT_EQ(tok_->token_to_piece(11, false), "\xC3");
  EXPECT_EQ(tok_->token_to_piece(12, false), "\xA9");
  EXPECT_EQ(tok_->token_to_piece(23, false), "\xAD");
  EXPECT_EQ(tok_->token_to_piece(24, false), "\x7F");
  EXPECT_EQ(tok_->token_to_piece(20, false), "");
  EXPECT_EQ(tok_->token_to_piece(20, true), "<|end|>");
  EXPECT_EQ(tok_->token_to_piece(21, false), "<tool>");
  EXPECT_EQ(tok_->decode({7, 20, 13}), " a\xC3\xA9");
  EXPECT_EQ(tok_->decode({7, 20, 13}, true), " a<|end|>\xC3\xA9");
  EXPECT_THROW(tok_->token_to_piece(static_cast<int32_t>(kTokens.size()), true), InputError);
  EXPECT_THROW(tok_->token_to_piece(-1, true), InputError);
}

// Llama 3 takes a word that is a token as a whole without merging (its "ignore merges" rule), and
// adds BOS unless the file says otherwise.
TEST(BpeTokenizerLlama3, WholeWordTokenSkipsMerges) {
  const auto tok = tokenizer_of(vocab_writer("llama-bpe"), "tokenizer_bpe_llama3");
  EXPECT_EQ(tok->encode("abc", false, false), Ids{5});
  EXPECT_EQ(tok->encode(" ab", false, false), (Ids{6, 3}));  // " ab" is no token: merged as usual
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("abc", true, false), (Ids{22, 5}));
}

TEST(BpeTokenizerFlags, AddBosAndEosFromFile) {
  gguf::Writer w = vocab_writer("qwen2");
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  const auto tok = tokenizer_of(w, "tokenizer_bpe_flags");
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("abc", true, false), (Ids{22, 0, 4, 20}));
}

TEST(BpeTokenizerFlags, MissingPreMeansGpt2) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", kTokens);
  w.set_string_array("tokenizer.ggml.merges", kMerges);
  const auto tok = tokenizer_of(w, "tokenizer_bpe_nopre");
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{0, 4}));
  EXPECT_FALSE(tok->add_bos());
}

// The regex families, on words where they differ.
TEST(PreTokenizerSplit, DigitGrouping) {
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Gpt2).split("12345"), Words{"12345"});
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Llama3).split("12345"), (Words{"123", "45"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Qwen2).split("12345"), (Words{"1", "2", "3", "4", "5"}));
}

// GPT-2 knows lower-case contractions only; Llama 3 takes either case.
TEST(PreTokenizerSplit, Contractions) {
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Gpt2).split("it's I'M"), (Words{"it", "'s", " I", "'", "M"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Llama3).split("it's I'M"), (Words{"it", "'s", " I", "'M"}));
}

// GPT-2 leaves the last space of a run to the next word and newlines alone; Llama 3 groups newlines.
TEST(PreTokenizerSplit, Whitespace) {
  const PreTokenizer& gpt2 = PreTokenizer::get(PreTokenizerKind::Gpt2);
  EXPECT_EQ(gpt2.split("a   b "), (Words{"a", "  ", " b", " "}));
  EXPECT_EQ(gpt2.split("a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Llama3).split("a\n\nb"), (Words{"a", "\n\n", "b"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Llama3).split("x.\n\ny"), (Words{"x", ".\n\n", "y"}));
}

// Unicode classes: é and ö are letters, U+0663 (Arabic-Indic three) a digit, NBSP a space.
TEST(PreTokenizerSplit, UnicodeClasses) {
  const PreTokenizer& gpt2 = PreTokenizer::get(PreTokenizerKind::Gpt2);
  EXPECT_EQ(gpt2.split("h\xC3\xA9llo w\xC3\xB6rld"), (Words{"h\xC3\xA9llo", " w\xC3\xB6rld"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Qwen2).split("a\xD9\xA3"), (Words{"a", "\xD9\xA3"}));
  EXPECT_EQ(gpt2.split("a\xC2\xA0" "b"), (Words{"a", "\xC2\xA0", "b"}));
}

// An invalid byte becomes U+FFFD (a symbol, so a word of its own between letters).
TEST(PreTokenizerSplit, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(sanitize_utf8("a\xFF" "b\xE2\x96"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Gpt2).split("a\xFF" "b"), (Words{"a", "\xEF\xBF\xBD", "b"}));
}

// Long runs stay within PCRE2's backtracking limits (a whole text file is tokenized at once).
TEST(PreTokenizerSplit, LongRuns) {
  const size_t n = 1000000;
  const std::string spaces(n, ' ');
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Gpt2).split("a" + spaces + "b"),
            (Words{"a", std::string(n - 1, ' '), " b"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Llama3).split(std::string(n, 'x') + "\n"),
            (Words{std::string(n, 'x'), "\n"}));
  EXPECT_EQ(PreTokenizer::get(PreTokenizerKind::Qwen2).split(std::string(n, '\n') + "y"),
            (Words{std::string(n, '\n'), "y"}));
}

TEST(PreTokenizerNames, KnownAndUnknown) {
  EXPECT_EQ(pretokenizer_kind("gpt-2"), PreTokenizerKind::Gpt2);
  EXPECT_EQ(pretokenizer_kind("llama-bpe"), PreTokenizerKind::Llama3);
  EXPECT_EQ(pretokenizer_kind("deepseek-r1-qwen"), PreTokenizerKind::Qwen2);
  EXPECT_EQ(pretokenizer_kind("falcon"), std::nullopt);
}

TEST(BpeTokenizerErrors, UnknownPreNamesSupportedOnes) {
  std::string path;
  const std::string msg = vocab_refusal(vocab_writer("falcon"), "tokenizer_bpe_pre", &path);
  expect_mentions(msg, {path, "tokenizer.ggml.pre", "\"falcon\"", "\"gpt-2\"", "\"qwen2\"", "\"llama-bpe\""});
}

TEST(BpeTokenizerErrors, MalformedMerge) {
  gguf::Writer w = vocab_writer();
  w.set_string_array("tokenizer.ggml.merges", {"a b", "bc"});
  std::string path;
  const std::string msg = vocab_refusal(w, "tokenizer_bpe_merge", &path);
  expect_mentions(msg, {path, "tokenizer.ggml.merges", "element 1", "\"bc\""});
}

TEST(BpeTokenizerErrors, MissingMerges) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", kTokens);
  const std::string msg = vocab_refusal(w, "tokenizer_bpe_nomerges");
  expect_mentions(msg, {"tokenizer.ggml.merges", "missing"});
}

}  // namespace
}  // namespace glacier::model
