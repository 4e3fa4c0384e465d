// The load-time NaN/Inf scan covers the scales (and mins) of Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K and Q3_K blocks: a
// non-finite one in any scale slot is counted at the first element of its block; finite blocks pass.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/quant_blocks.h"
#include "model/finite_scan.h"

namespace {

using glacier::gguf::TensorType;
namespace k = glacier::kernels;

struct Case {
  TensorType type;
  size_t block_bytes;
  std::vector<size_t> scale_offsets;  // from the block layout: d, and m (dmin) for the _1 types and Q2_K
  int64_t block_elems = k::kQK8_0;
};

TEST(FiniteScanQuantTypes, EveryScaleSlotOfTheNewBlockTypesIsScanned) {
  const Case cases[] = {
      {TensorType::Q4_1, sizeof(k::BlockQ4_1), {offsetof(k::BlockQ4_1, d), offsetof(k::BlockQ4_1, m)}},
      {TensorType::Q5_0, sizeof(k::BlockQ5_0), {offsetof(k::BlockQ5_0, d)}},
      {TensorType::Q5_1, sizeof(k::BlockQ5_1), {offsetof(k::BlockQ5_1, d), offsetof(k::BlockQ5_1, m)}},
      {TensorType::IQ4_NL, sizeof(k::BlockIQ4_NL), {offsetof(k::BlockIQ4_NL, d)}},
      {TensorType::Q2_K, sizeof(k::BlockQ2_K), {offsetof(k::BlockQ2_K, d), offsetof(k::BlockQ2_K, dmin)}, k::kQK_K},
      {TensorType::Q3_K, sizeof(k::BlockQ3_K), {offsetof(k::BlockQ3_K, d)}, k::kQK_K},
  };
  constexpr int kBlocks = 6;
  const uint16_t finite = k::f32_to_fp16(0.5f);
  for (const Case& c : cases) {
    for (size_t slot : c.scale_offsets) {
      // Every scale 0.5 and every level byte 0xff (all-ones level bits must not look like an exponent).
      std::vector<uint8_t> data(c.block_bytes * kBlocks, 0xff);
      for (int b = 0; b < kBlocks; ++b)
        for (size_t off : c.scale_offsets) std::memcpy(&data[b * c.block_bytes + off], &finite, 2);
      glacier::gguf::TensorInfo t;
      t.name = "w";
      t.type = c.type;
      t.n_dims = 2;
      t.ne[0] = c.block_elems * 3;
      t.ne[1] = 2;
      t.n_bytes = data.size();
      t.data = data.data();
      EXPECT_EQ(glacier::model::count_non_finite(t).count, 0u) << glacier::gguf::type_name(c.type);
      const uint16_t nan = k::f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
      std::memcpy(&data[4 * c.block_bytes + slot], &nan, 2);
      const auto r = glacier::model::count_non_finite(t);
      EXPECT_EQ(r.count, 1u) << glacier::gguf::type_name(c.type) << " slot " << slot;
      EXPECT_EQ(r.first_element, 4 * c.block_elems) << glacier::gguf::type_name(c.type) << " slot " << slot;
    }
  }
}

}  // namespace
