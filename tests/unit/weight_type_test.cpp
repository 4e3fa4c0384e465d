// A tensor type the kernels cannot compute with is refused naming the tensor, its type and every
// supported type; the supported ones map to their kernel types.
#include <gtest/gtest.h>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_weights.h"
#include "util/error.h"

namespace {

using glacier::gguf::TensorType;

std::unique_ptr<glacier::gguf::File> file_with(TensorType type, size_t block_bytes) {
  glacier::gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blk.0.attn_q.weight", type, {32, 1}, std::vector<uint8_t>(block_bytes, 0));
  const std::string path = glacier::testing::scratch_dir("wtype") + "/m.gguf";
  w.write(path);
  return glacier::gguf::File::open(path);
}

TEST(WeightType, UnsupportedTypeIsRefusedWithTheSupportedList) {
  auto f = file_with(TensorType::Q8_1, 36);  // an activation format, never a weight type
  try {
    glacier::model::weight_type_of(*f, f->tensors()[0]);
    FAIL() << "q8_1 accepted";
  } catch (const glacier::InputError& e) {
    const std::string msg = e.what();
    for (const char* part : {"blk.0.attn_q.weight", "q8_1", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                             "iq4_nl", "iq4_xs", "q4_k", "q5_k", "q6_k"})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from: " << msg;
  }
}

TEST(WeightType, SupportedTypesMap) {
  using glacier::kernels::WeightType;
  const struct {
    TensorType stored;
    size_t block_bytes;
    WeightType computed;
  } cases[] = {{TensorType::Q8_0, 34, WeightType::Q8_0}, {TensorType::Q4_1, 20, WeightType::Q4_1},
               {TensorType::Q5_0, 22, WeightType::Q5_0}, {TensorType::Q5_1, 24, WeightType::Q5_1},
               {TensorType::IQ4_NL, 18, WeightType::IQ4_NL}};
  for (const auto& c : cases) {
    auto f = file_with(c.stored, c.block_bytes);
    EXPECT_EQ(glacier::model::weight_type_of(*f, f->tensors()[0]), c.computed) << glacier::gguf::type_name(c.stored);
  }
}

}  // namespace
