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
  auto f = file_with(TensorType::Q5_0, 22);
  try {
    glacier::model::weight_type_of(*f, f->tensors()[0]);
    FAIL() << "q5_0 accepted";
  } catch (const glacier::InputError& e) {
    const std::string msg = e.what();
    for (const char* part : {"blk.0.attn_q.weight", "q5_0", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from: " << msg;
  }
}

TEST(WeightType, SupportedTypesMap) {
  auto f = file_with(TensorType::Q8_0, 34);
  EXPECT_EQ(glacier::model::weight_type_of(*f, f->tensors()[0]), glacier::kernels::WeightType::Q8_0);
}

}  // namespace
