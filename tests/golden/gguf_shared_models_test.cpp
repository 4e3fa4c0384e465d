// GGUF reader on the real and synthetic models in ../shared/models: every file opens, and the facts
// documented in models/README.md and models/synthetic/README.md (counts, shapes, types) hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/gguf_files.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "util/error.h"

namespace glacier::gguf {
namespace {

namespace fs = std::filesystem;

std::map<TensorType, int> count_types(const File& f) {
  std::map<TensorType, int> n;
  for (const TensorInfo& t : f.tensors()) ++n[t.type];
  return n;
}

TEST(GgufSharedModels, EveryModelFileOpens) {
  GLACIER_REQUIRE_SHARED(dir, "models");
  int opened = 0;
  for (const std::string& path : glacier::testing::gguf_files_under(dir)) {
    SCOPED_TRACE(path);
    std::unique_ptr<File> f;
    ASSERT_NO_THROW(f = File::open(path));
    // README: all files are GGUF v3 with the default alignment and no general.alignment key.
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->file_size(), fs::file_size(path));
    EXPECT_FALSE(f->get_string("general.architecture").empty());
    for (const TensorInfo& t : f->tensors()) {
      ASSERT_NE(t.data, nullptr) << t.name;
      EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size()) << t.name;
    }
    ++opened;
  }
  // 5 stories260K-family + vocab files, 18 synthetic models.
  EXPECT_GE(opened, 24);
}

TEST(GgufSharedModels, Stories260K) {
  GLACIER_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto f = File::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f->get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f->get_uint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f->get_uint("llama.context_length"), 2048u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 512u);
  auto token_types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(token_types.size(), 512u);
  EXPECT_EQ(token_types[3], 6);    // byte token
  EXPECT_EQ(token_types[300], 1);  // normal token

  EXPECT_EQ(count_types(*f)[TensorType::F32], 48);
  const TensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, TensorType::F32);
  EXPECT_EQ(embd->n_dims, 2);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 512);
  EXPECT_EQ(embd->n_bytes, 64u * 512u * 4u);
  const TensorInfo* down = f->find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne[0], 172);
  EXPECT_EQ(down->ne[1], 64);
  const TensorInfo* k = f->find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne[0], 64);
  EXPECT_EQ(k->ne[1], 32);
  // README: token_embd and output are separate tensors holding identical values, so the two views
  // into the mapping must compare equal byte for byte.
  const TensorInfo* out = f->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->n_bytes, embd->n_bytes);
  EXPECT_NE(out->data, embd->data);
  EXPECT_EQ(std::memcmp(out->data, embd->data, embd->n_bytes), 0);
}

TEST(GgufSharedModels, Stories260KQuantizedVariants) {
  GLACIER_REQUIRE_SHARED(q8, "models/stories260K-q8_0.gguf");
  GLACIER_REQUIRE_SHARED(q4, "models/stories260K-q4_0.gguf");
  GLACIER_REQUIRE_SHARED(f16, "models/stories260K-f16.gguf");
  {
    auto f = File::open(q8);
    auto n = count_types(*f);
    EXPECT_EQ(n[TensorType::Q8_0], 32);
    EXPECT_EQ(n[TensorType::F32], 16);  // 11 norms + 5 ffn_down (row length 172)
    EXPECT_EQ(f->get_uint("general.file_type"), 7u);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, TensorType::F32);
    const TensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, TensorType::Q8_0);
    EXPECT_EQ(q->n_bytes, 64u / 32u * 34u * 64u);
  }
  {
    auto f = File::open(q4);
    auto n = count_types(*f);
    EXPECT_EQ(n[TensorType::Q4_0], 32);
    EXPECT_EQ(f->get_uint("general.file_type"), 2u);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->type, TensorType::Q4_0);
    EXPECT_EQ(f->find_tensor("output.weight")->type, TensorType::Q4_0);
  }
  {
    auto f = File::open(f16);
    auto n = count_types(*f);
    EXPECT_EQ(n[TensorType::F16], 37);
    EXPECT_EQ(n[TensorType::F32], 11);
  }
}

TEST(GgufSharedModels, VocabOnlyFiles) {
  GLACIER_REQUIRE_SHARED(spm, "models/vocab/ggml-vocab-llama-spm.gguf");
  GLACIER_REQUIRE_SHARED(gpt2, "models/vocab/ggml-vocab-gpt-2.gguf");
  auto s = File::open(spm);
  EXPECT_TRUE(s->tensors().empty());
  EXPECT_EQ(s->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(s->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(s->get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(s->get_uint("tokenizer.ggml.eos_token_id"), 2u);
  auto g = File::open(gpt2);
  EXPECT_TRUE(g->tensors().empty());
  EXPECT_EQ(g->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens").size(), 50257u);
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.merges").size(), 50000u);
  EXPECT_EQ(g->get_uint("tokenizer.ggml.bos_token_id"), 50256u);
}

// Tensor type mix per synthetic file, from the table in models/synthetic/README.md.
TEST(GgufSharedModels, SyntheticTensorTypes) {
  GLACIER_REQUIRE_SHARED(dir, "models/synthetic");
  struct Row {
    const char* file;
    std::map<TensorType, int> types;
  };
  using T = TensorType;
  const Row rows[] = {
      {"synth-llama-f16.gguf", {{T::F16, 16}, {T::F32, 5}}},
      {"synth-llama-bf16.gguf", {{T::BF16, 16}, {T::F32, 5}}},
      {"synth-llama-q8_0.gguf", {{T::Q8_0, 16}, {T::F32, 5}}},
      {"synth-llama-q4_0.gguf", {{T::Q4_0, 16}, {T::F32, 5}}},
      {"synth-llama-q4_k.gguf", {{T::Q4_K, 16}, {T::F32, 5}}},
      {"synth-llama-q5_k.gguf", {{T::Q5_K, 16}, {T::F32, 5}}},
      {"synth-llama-q6_k.gguf", {{T::Q6_K, 16}, {T::F32, 5}}},
      {"synth-llama-q4_k_m.gguf", {{T::Q4_K, 13}, {T::Q6_K, 3}, {T::F32, 5}}},
      {"synth-mixtral-f32.gguf", {{T::F32, 33}}},
      {"synth-mixtral-q8_0.gguf", {{T::Q8_0, 23}, {T::F32, 10}}},
      {"synth-qwen2-f32.gguf", {{T::F32, 26}}},
      {"synth-qwen2-q8_0.gguf", {{T::Q8_0, 15}, {T::F32, 11}}},
      {"synth-qwen2moe-f32.gguf", {{T::F32, 37}}},
      {"synth-qwen2moe-q8_0.gguf", {{T::Q8_0, 22}, {T::F32, 15}}},
      {"synth-gemma-f32.gguf", {{T::F32, 20}}},
      {"synth-phi3-f32.gguf", {{T::F32, 15}}},
      {"synth-qwen3-f32.gguf", {{T::F32, 24}}},
      {"synth-qwen3moe-f32.gguf", {{T::F32, 27}}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.file);
    std::string path = dir + "/" + r.file;
    ASSERT_TRUE(fs::exists(path));
    auto f = File::open(path);
    EXPECT_EQ(count_types(*f), r.types);
  }
  // Mixtral-style experts are 3-D: [n_embd, n_ff, n_expert] = [64, 128, 4].
  auto m = File::open(dir + "/synth-mixtral-q8_0.gguf");
  const TensorInfo* up = m->find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->n_dims, 3);
  EXPECT_EQ(up->ne[0], 64);
  EXPECT_EQ(up->ne[1], 128);
  EXPECT_EQ(up->ne[2], 4);
  EXPECT_EQ(up->type, TensorType::Q8_0);
}

}  // namespace
}  // namespace glacier::gguf
