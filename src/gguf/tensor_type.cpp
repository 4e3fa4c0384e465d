// Block geometry of the GGML tensor types GGUF can store, keyed by the on-disk type id.
// Ids that were retired (4, 5: the old Q4_2/Q4_3) or that this build does not know give nullopt.
#include "gguf/tensor_type.h"

namespace glacier::gguf {

namespace {

struct KnownType {
  uint32_t id;
  TypeTraits traits;
};

// Sizes follow the published block layouts: quant blocks hold a scale (and for _1 a min) per 32
// elements; K-quants group 256 elements into a super-block with packed sub-block scales; iq4_nl is
// q4_0's layout whose nibbles index a table of levels.
constexpr KnownType kKnownTypes[] = {
    {0, {"f32", 1, 4}},       {1, {"f16", 1, 2}},       {2, {"q4_0", 32, 18}},    {3, {"q4_1", 32, 20}},
    {6, {"q5_0", 32, 22}},    {7, {"q5_1", 32, 24}},    {8, {"q8_0", 32, 34}},    {9, {"q8_1", 32, 36}},
    {10, {"q2_K", 256, 84}},  {11, {"q3_K", 256, 110}}, {12, {"q4_K", 256, 144}}, {13, {"q5_K", 256, 176}},
    {14, {"q6_K", 256, 210}}, {15, {"q8_K", 256, 292}}, {20, {"iq4_nl", 32, 18}}, {23, {"iq4_xs", 256, 136}},
    {24, {"i8", 1, 1}},       {25, {"i16", 1, 2}},      {26, {"i32", 1, 4}},      {27, {"i64", 1, 8}},
    {28, {"f64", 1, 8}},      {30, {"bf16", 1, 2}},
};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type_id) {
  for (const KnownType& k : kKnownTypes) {
    if (k.id == type_id) return k.traits;
  }
  return std::nullopt;
}

std::string type_name(TensorType t) {
  auto traits = type_traits(static_cast<uint32_t>(t));
  if (traits) return traits->name;
  return "type#" + std::to_string(static_cast<uint32_t>(t));
}

}  // namespace glacier::gguf
