// SentencePiece tokenizer on a tiny hand-made vocabulary written with gguf::Writer: merge order,
// byte fallback, unknown tokens, special-token splitting, dummy-prefix rules, pieces and load errors.
// Every expected id list below is worked out by hand from kTokens (see the comment on each case).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "common/test_env.h"
#include "common/tokenizer_reference.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace glacier::model {
namespace {

using Ids = std::vector<int32_t>;

struct TokenSpec {
  std::string text;
  float score;
  TokenType type;
};

const TokenType N = TokenType::Normal;
const std::vector<TokenSpec> kTokens = {
    {"<unk>", 0.0f, TokenType::Unknown},         // 0
    {"<s>", 0.0f, TokenType::Control},           // 1
    {"</s>", 0.0f, TokenType::Control},          // 2
    {"<0x41>", 0.0f, TokenType::Byte},           // 3  'A'
    {"<0xC3>", 0.0f, TokenType::Byte},           // 4  first byte of "é"
    {"<0xA9>", 0.0f, TokenType::Byte},           // 5  second byte of "é"
    {"\xE2\x96\x81", -10.0f, N},                 // 6  "▁"
    {"a", -10.0f, N},                            // 7
    {"b", -10.0f, N},                            // 8
    {"c", -10.0f, N},                            // 9
    {"ab", -3.0f, N},                            // 10
    {"bc", -2.0f, N},                            // 11 beats "ab"
    {"\xE2\x96\x81" "a", -4.0f, N},              // 12 "▁a"
    {"x", -10.0f, N},                            // 13
    {"xx", -5.0f, N},                            // 14
    {"<user>", 0.0f, TokenType::UserDefined},    // 15
    {"\xE2\x96\x81" "b", -6.0f, N},              // 16 "▁b"
    {"<s>x", 0.0f, TokenType::Control},          // 17 longer than "<s>", which it contains
    {"<|eot_id|>", 0.0f, TokenType::Control},    // 18
    {"<|im_end|>", 0.0f, N},                     // 19 an end-of-turn text, but not a control token
    {"unused", 0.0f, TokenType::Unused},         // 20
};

std::vector<std::string> texts_of(const std::vector<TokenSpec>& tokens) {
  std::vector<std::string> out;
  for (const TokenSpec& t : tokens) out.push_back(t.text);
  return out;
}

// A writer holding the full valid vocabulary; tests change or drop keys before writing.
gguf::Writer vocab_writer() {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const TokenSpec& t : kTokens) {
    scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }
  w.set_string_array("tokenizer.ggml.tokens", texts_of(kTokens));
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  return w;
}

using testing::expect_mentions;
using testing::tokenizer_of;
using testing::vocab_refusal;

class SpmTokenizerTest : public testing::VocabTokenizerTest {
 protected:
  void SetUp() override { tok_ = tokenizer_of(vocab_writer(), "tokenizer_spm_base"); }
};

TEST_F(SpmTokenizerTest, VocabularyFacts) {
  EXPECT_EQ(tok_->n_vocab(), static_cast<int32_t>(kTokens.size()));
  EXPECT_EQ(tok_->bos(), 1);
  EXPECT_EQ(tok_->eos(), 2);
  EXPECT_TRUE(tok_->add_bos());  // no add_bos_token key: SentencePiece vocabularies add BOS
  EXPECT_EQ(tok_->token_text(12), "\xE2\x96\x81" "a");
  EXPECT_EQ(tok_->token_type(15), TokenType::UserDefined);
}

// "abc" -> "▁abc" = ▁ a b c. Pairs: "▁a" -4, "ab" -3, "bc" -2. "bc" merges first although "ab" is
// further left; "ab" is then stale, "abc" is no token, so "▁a" merges: [▁a, bc].
TEST_F(SpmTokenizerTest, HighestScorePairMergesFirst) { EXPECT_EQ(plain("abc"), (Ids{12, 11})); }

// "xxx" -> ▁ x x x. "▁x" is no token; the two "xx" pairs tie at -5, the left one wins: [▁, xx, x].
TEST_F(SpmTokenizerTest, EqualScoresMergeLeftmostPair) { EXPECT_EQ(plain("xxx"), (Ids{6, 14, 13})); }

// "A" and "é" are no tokens: their bytes become the byte tokens <0x41>, <0xC3> <0xA9>.
TEST_F(SpmTokenizerTest, ByteFallback) {
  EXPECT_EQ(plain("A"), (Ids{6, 3}));
  EXPECT_EQ(plain("\xC3\xA9"), (Ids{6, 4, 5}));
}

// "z" has no token, no "<0x7A>" and no one-byte token "z": it becomes <unk>.
TEST_F(SpmTokenizerTest, ByteWithoutTokenIsUnknown) { EXPECT_EQ(plain("za"), (Ids{6, 0, 7})); }

// A lead byte 0xC3 announces a 2-byte character, so "\xC3" "a" is one symbol (as llama.cpp cuts it):
// it is no token, so its bytes fall back to <0xC3> and "a" (the one-byte token standing for 0x61),
// and "ab" never forms: [▁, <0xC3>, a, b]. A stray continuation byte is a symbol of its own.
TEST_F(SpmTokenizerTest, MalformedUtf8FollowsLeadByteLength) {
  EXPECT_EQ(plain("\xC3" "ab"), (Ids{6, 4, 7, 8}));
  EXPECT_EQ(plain("\xA9"), (Ids{6, 5}));
}

TEST_F(SpmTokenizerTest, DummyPrefixAndSpaces) {
  EXPECT_EQ(plain(""), Ids{});
  EXPECT_EQ(tok_->encode("", true, false), Ids{1});
  EXPECT_EQ(plain(" "), (Ids{6, 6}));       // "▁▁" is no token
  EXPECT_EQ(plain("a b"), (Ids{12, 16}));   // "▁a▁b"
  EXPECT_EQ(tok_->encode("a", true, false), (Ids{1, 12}));
}

// "<s>" as text is "<", "s", ">": no tokens and no byte tokens, so three <unk>. With parse_special it
// is the control token, and the text after it gets the dummy prefix again ("▁b").
TEST_F(SpmTokenizerTest, ParseSpecialSplitsControlTokens) {
  EXPECT_EQ(plain("a<s>b"), (Ids{12, 0, 0, 0, 8}));
  EXPECT_EQ(tok_->encode("a<s>b", false, true), (Ids{12, 1, 16}));
  EXPECT_EQ(tok_->encode("<s>", true, true), (Ids{1, 1}));  // BOS, then the parsed "<s>"; no "▁"
  EXPECT_EQ(tok_->encode("</s>", false, true), Ids{2});
}

// "<s>x" is longer than "<s>", so it is cut out first: [<s>x], then "▁b".
TEST_F(SpmTokenizerTest, LongerSpecialTokenWins) { EXPECT_EQ(tok_->encode("<s>xb", false, true), (Ids{17, 16})); }

// User-defined tokens are recognised even without parse_special.
TEST_F(SpmTokenizerTest, UserDefinedTokensAlwaysSplit) {
  EXPECT_EQ(plain("a<user>b"), (Ids{12, 15, 16}));
}

TEST_F(SpmTokenizerTest, Pieces) {
  EXPECT_EQ(tok_->token_to_piece(12, false), " a");
  EXPECT_EQ(tok_->token_to_piece(3, false), "A");
  EXPECT_EQ(tok_->token_to_piece(4, false), "\xC3");
  EXPECT_EQ(tok_->token_to_piece(1, false), "");
  EXPECT_EQ(tok_->token_to_piece(1, true), "<s>");
  EXPECT_EQ(tok_->token_to_piece(0, false), "");
  EXPECT_EQ(tok_->token_to_piece(0, true), "<unk>");
  EXPECT_EQ(tok_->token_to_piece(15, false), "<user>");
  EXPECT_EQ(tok_->token_to_piece(20, true), "");
  EXPECT_EQ(tok_->decode({12, 11, 1, 3}), " abcA");
  EXPECT_EQ(tok_->decode({12, 11, 1, 3}, true), " abc<s>A");
  EXPECT_THROW(tok_->token_to_piece(static_cast<int32_t>(kTokens.size()), true), InputError);
  EXPECT_THROW(tok_->token_to_piece(-1, true), InputError);
}

TEST_F(SpmTokenizerTest, EndOfGeneration) {
  EXPECT_TRUE(tok_->is_end_of_generation(2));    // EOS
  EXPECT_TRUE(tok_->is_end_of_generation(18));   // "<|eot_id|>", control
  EXPECT_FALSE(tok_->is_end_of_generation(19));  // "<|im_end|>" but a normal token
  EXPECT_FALSE(tok_->is_end_of_generation(1));
}

TEST(SpmTokenizerFlags, NoSpacePrefixAddEosNoBos) {
  gguf::Writer w = vocab_writer();
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  const auto tok = tokenizer_of(w, "tokenizer_spm_flags");
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{7, 11}));  // a b c -> a bc; "abc" is no token
  EXPECT_EQ(tok->encode("abc", true, false), (Ids{7, 11, 2}));
}

TEST(SpmTokenizerFlags, MissingSpecialIdsUseDefaultsAndNoneMeansNone) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", texts_of(kTokens));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_u32("tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);  // "none", as converters write it
  const auto tok = tokenizer_of(w, "tokenizer_spm_defaults");
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), -1);
  // No scores (all 0): in "▁xabc" the pairs "ab" and "bc" tie and the left one merges ("▁x", "xa",
  // "xab", "abc" are no tokens): [▁, x, ab, c]. With the scores, "bc" would have won.
  EXPECT_EQ(tok->encode("xabc", false, false), (Ids{6, 13, 10, 9}));
  // No types (all normal): "<s>" is no control token, so parse_special leaves it as text, and its
  // characters have neither tokens nor byte tokens.
  EXPECT_EQ(tok->encode("<s>", false, true), (Ids{6, 0, 0, 0}));
}

TEST(SpmTokenizerErrors, ScoresLengthMismatch) {
  gguf::Writer w = vocab_writer();
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, 1.0f, 2.0f});
  std::string path;
  const std::string msg = vocab_refusal(w, "tokenizer_spm_scores", &path);
  expect_mentions(msg, {path, "tokenizer.ggml.scores",
                        std::to_string(kTokens.size()) + " elements", "found 3 elements"});
}

TEST(SpmTokenizerErrors, TokenTypeLengthMismatch) {
  gguf::Writer w = vocab_writer();
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1});
  const std::string msg = vocab_refusal(w, "tokenizer_spm_types");
  expect_mentions(msg, {"tokenizer.ggml.token_type", "found 2 elements"});
}

TEST(SpmTokenizerErrors, UnsupportedModelNamesSupportedOnes) {
  gguf::Writer w = vocab_writer();
  w.set_string("tokenizer.ggml.model", "bert");
  std::string path;
  const std::string msg = vocab_refusal(w, "tokenizer_spm_model", &path);
  expect_mentions(msg, {path, "tokenizer.ggml.model", "\"bert\"", "\"llama\""});
}

TEST(SpmTokenizerErrors, SpecialIdOutOfRange) {
  gguf::Writer w = vocab_writer();
  w.set_u32("tokenizer.ggml.bos_token_id", 500);
  const std::string msg = vocab_refusal(w, "tokenizer_spm_bos");
  expect_mentions(msg, {"tokenizer.ggml.bos_token_id", "500"});
}

TEST(SpmTokenizerErrors, MalformedByteToken) {
  std::vector<TokenSpec> tokens = kTokens;
  tokens[3].text = "<0xZZ>";
  gguf::Writer w = vocab_writer();
  w.set_string_array("tokenizer.ggml.tokens", texts_of(tokens));
  const std::string msg = vocab_refusal(w, "tokenizer_spm_bytetok");
  expect_mentions(msg, {"tokenizer.ggml.tokens", "<0xZZ>"});
}

TEST(SpmTokenizerErrors, TokenTypeOutOfRange) {
  std::vector<int32_t> types(kTokens.size(), 1);
  types[7] = 9;
  gguf::Writer w = vocab_writer();
  w.set_i32_array("tokenizer.ggml.token_type", types);
  const std::string msg = vocab_refusal(w, "tokenizer_spm_typeval");
  expect_mentions(msg, {"tokenizer.ggml.token_type", "element 7"});
}

TEST(SpmTokenizerErrors, MissingTokens) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  const std::string msg = vocab_refusal(w, "tokenizer_spm_notokens");
  expect_mentions(msg, {"tokenizer.ggml.tokens"});
}

}  // namespace
}  // namespace glacier::model
