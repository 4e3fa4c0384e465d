// Completeness of the per-variant DotKernels tables: a field a table forgets (designated initialisers
// leave it null) would crash or silently fall back at run time, so every field is checked by name here.
#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <type_traits>

#include "kernels/dispatch.h"

namespace glacier::kernels {
namespace {

// One DotKernels field: its name, whether a table has it set, and whether null is a documented choice
// (RowGemmFn fields: null means the tile loop of matmul.cpp, dispatch.h).
struct TableField {
  const char* name;
  bool (*is_set)(const DotKernels&);
  bool null_allowed_by_design;
};

#define GLACIER_TABLE_FIELD(field)                                    \
  TableField {                                                        \
    #field, [](const DotKernels& k) { return k.field != nullptr; },   \
        std::is_same_v<decltype(DotKernels::field), RowGemmFn>        \
  }

constexpr TableField kFields[] = {
    GLACIER_TABLE_FIELD(f32_f32),
    GLACIER_TABLE_FIELD(f16_f16),
    GLACIER_TABLE_FIELD(bf16_bf16),
    GLACIER_TABLE_FIELD(q8_0_q8_0),
    GLACIER_TABLE_FIELD(q4_0_q8_0),
    GLACIER_TABLE_FIELD(quantize_row_q8_0),
    GLACIER_TABLE_FIELD(q4_0_q8_0_block_sums),
    GLACIER_TABLE_FIELD(q8_0_q8_0_block_sums),
    GLACIER_TABLE_FIELD(f32_f32_tile),
    GLACIER_TABLE_FIELD(f16_f16_tile),
    GLACIER_TABLE_FIELD(bf16_bf16_tile),
    GLACIER_TABLE_FIELD(q8_0_q8_0_tile),
    GLACIER_TABLE_FIELD(q4_0_q8_0_tile),
    GLACIER_TABLE_FIELD(q4_0_q8_0_block_sums_tile),
    GLACIER_TABLE_FIELD(q8_0_q8_0_block_sums_tile),
    GLACIER_TABLE_FIELD(q4_k_q8_k),
    GLACIER_TABLE_FIELD(q5_k_q8_k),
    GLACIER_TABLE_FIELD(q6_k_q8_k),
    GLACIER_TABLE_FIELD(quantize_row_q8_k),
    GLACIER_TABLE_FIELD(q4_k_q8_k_tile),
    GLACIER_TABLE_FIELD(q5_k_q8_k_tile),
    GLACIER_TABLE_FIELD(q6_k_q8_k_tile),
    GLACIER_TABLE_FIELD(q8_0_packed_gemm),
    GLACIER_TABLE_FIELD(q8_0_packed_block_sums_gemm),
    GLACIER_TABLE_FIELD(q4_0_packed_gemm),
    GLACIER_TABLE_FIELD(q4_0_packed_block_sums_gemm),
    GLACIER_TABLE_FIELD(attend),
    GLACIER_TABLE_FIELD(swiglu),
    GLACIER_TABLE_FIELD(sum_exp),
    GLACIER_TABLE_FIELD(f16_gemm),
    GLACIER_TABLE_FIELD(q4_1_q8_1),
    GLACIER_TABLE_FIELD(q5_0_q8_0),
    GLACIER_TABLE_FIELD(q5_1_q8_1),
    GLACIER_TABLE_FIELD(iq4_nl_q8_0),
    GLACIER_TABLE_FIELD(quantize_row_q8_1),
    GLACIER_TABLE_FIELD(q4_1_q8_1_tile),
    GLACIER_TABLE_FIELD(q5_0_q8_0_tile),
    GLACIER_TABLE_FIELD(q5_1_q8_1_tile),
    GLACIER_TABLE_FIELD(iq4_nl_q8_0_tile),
    GLACIER_TABLE_FIELD(iq4_xs_q8_k),
    GLACIER_TABLE_FIELD(iq4_xs_q8_k_tile),
    GLACIER_TABLE_FIELD(q2_k_q8_k),
    GLACIER_TABLE_FIELD(q3_k_q8_k),
    GLACIER_TABLE_FIELD(q2_k_q8_k_tile),
    GLACIER_TABLE_FIELD(q3_k_q8_k_tile),
    GLACIER_TABLE_FIELD(bf16_gemm),
    GLACIER_TABLE_FIELD(f32_to_f16_row),
    GLACIER_TABLE_FIELD(round_to_f16_row),
};

#undef GLACIER_TABLE_FIELD

// Every DotKernels field is a function pointer, so the struct's size counts them: a field added to
// dispatch.h but not to kFields stops this test from compiling instead of going unchecked.
static_assert(sizeof(DotKernels) == std::size(kFields) * sizeof(void (*)()),
              "kFields must list every DotKernels field: add the new one");

// The size check above counts fields; distinct names make the count mean "each field once".
TEST(KernelTables, FieldListNamesEachFieldOnce) {
  std::set<std::string> names;
  for (const TableField& f : kFields) EXPECT_TRUE(names.insert(f.name).second) << f.name << " listed twice";
}

// The reference table defines what exists: only the fields documented as optional may be null there.
TEST(KernelTables, RefLeavesOnlyOptionalFieldsNull) {
  const DotKernels& ref = ref_kernels();
  for (const TableField& f : kFields)
    EXPECT_TRUE(f.is_set(ref) || f.null_allowed_by_design) << "ref table: field " << f.name << " is null";
}

// Each variant this CPU can run has every kernel the reference has, so no call falls through to null.
TEST(KernelTables, EverySupportedVariantHasEveryKernelTheRefHas) {
  const DotKernels& ref = ref_kernels();
  for (Isa isa : supported_isas()) {
    const DotKernels& table = kernels_for(isa);
    for (const TableField& f : kFields)
      EXPECT_TRUE(!f.is_set(ref) || f.is_set(table))
          << isa_name(isa) << " table: field " << f.name << " is null but the ref table has it";
  }
}

}  // namespace
}  // namespace glacier::kernels
