// Kernel variant choice: cpuid-based default, GLACIER_KERNELS requests (known, unsupported,
// unknown) and the process-wide choice read from the environment once.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace glacier::kernels {
namespace {

TEST(Dispatch, RefIsAlwaysSupportedAndListedFirst) {
  const auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Ref);
  EXPECT_TRUE(cpu_supports(Isa::Ref));
}

TEST(Dispatch, NoRequestMeansTheBestSupportedVariant) {
  EXPECT_EQ(isa_for_request(nullptr), supported_isas().back());
  EXPECT_EQ(isa_for_request(""), supported_isas().back());
}

TEST(Dispatch, EverySupportedVariantCanBeRequestedByName) {
  for (Isa isa : supported_isas()) EXPECT_EQ(isa_for_request(isa_name(isa)), isa);
}

TEST(Dispatch, UnknownRequestNamesTheValueAndTheChoices) {
  try {
    isa_for_request("avx9000");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GLACIER_KERNELS"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'avx9000'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ref, avx2, avx2-vnni, avx512-novnni, avx512-nobf16, avx512"), std::string::npos) << msg;
  }
  EXPECT_THROW(isa_for_request("AVX2"), InputError);  // names are exact
}

TEST(Dispatch, UnsupportedRequestListsWhatIsSupported) {
  bool any_unsupported = false;
  for (Isa isa : {Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512NoVnni, Isa::Avx512NoBf16, Isa::Avx512}) {
    if (cpu_supports(isa)) continue;
    any_unsupported = true;
    try {
      isa_for_request(isa_name(isa));
      FAIL() << "expected InputError for " << isa_name(isa);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("GLACIER_KERNELS=") + isa_name(isa)), std::string::npos) << msg;
      EXPECT_NE(msg.find("supported: ref"), std::string::npos) << msg;
    }
    EXPECT_THROW(kernels_for(isa), InternalError);
    EXPECT_THROW(set_active_isa(isa), InternalError);
  }
  if (!any_unsupported) GTEST_SKIP() << "this CPU supports every variant: nothing to refuse";
}

TEST(Dispatch, SetActiveIsaOverridesTheChoice) {
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    EXPECT_EQ(active_isa(), isa);
    EXPECT_EQ(&active_kernels(), &kernels_for(isa));
  }
}

// The environment is read once per process, so these run in a fresh process (death-test style
// "threadsafe" re-executes the binary) and report through the exit code.
TEST(DispatchDeathTest, EnvironmentRequestIsHonoured) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GLACIER_KERNELS", "ref", 1);
        std::exit(active_isa() == Isa::Ref ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(DispatchDeathTest, UnknownEnvironmentValueIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GLACIER_KERNELS", "bogus", 1);
        try {
          active_isa();
        } catch (const InputError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3),
      "GLACIER_KERNELS: expected one of ref, avx2, avx2-vnni, avx512-novnni, avx512-nobf16, avx512, found 'bogus'");
}

// Each tier adds features to the one below (dispatch.h), so a CPU that runs a tier runs every lower tier of
// its family, and the AVX-512 tiers need AVX2: a tier list with a gap would mean a detection bug.
TEST(Dispatch, TiersAreNestedByFeature) {
  const std::pair<Isa, Isa> needs[] = {{Isa::Avx512, Isa::Avx512NoBf16},
                                       {Isa::Avx512NoBf16, Isa::Avx512NoVnni},
                                       {Isa::Avx512NoVnni, Isa::Avx2},
                                       {Isa::Avx2Vnni, Isa::Avx2}};
  for (const auto& [tier, below] : needs)
    EXPECT_TRUE(!cpu_supports(tier) || cpu_supports(below)) << isa_name(tier) << " without " << isa_name(below);
}

// Every tier this CPU has is forced by name from the environment, as a user would on a machine with more.
TEST(DispatchDeathTest, EveryTierCanBeForcedFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (Isa isa : supported_isas()) {
    EXPECT_EXIT(
        {
          setenv("GLACIER_KERNELS", isa_name(isa), 1);
          std::exit(active_isa() == isa && &active_kernels() == &kernels_for(isa) ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << isa_name(isa);
  }
}

}  // namespace
}  // namespace glacier::kernels
