// Binding plans: the splitting arithmetic, plans on synthetic hosts (several NUMA nodes, SMT) and
// on this machine, and that binding a thread really changes its CPU affinity.
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "sys/binding.h"
#include "util/error.h"

namespace glacier::sys {
namespace {

TEST(SysSplitEvenly, EqualParts) {
  EXPECT_EQ(split_evenly(8, 4, 0).begin, 0);
  EXPECT_EQ(split_evenly(8, 4, 0).end, 2);
  EXPECT_EQ(split_evenly(8, 4, 3).begin, 6);
  EXPECT_EQ(split_evenly(8, 4, 3).end, 8);
}

TEST(SysSplitEvenly, RemainderGoesToTheFirstParts) {
  // 10 items in 4 parts: sizes 3, 3, 2, 2 at offsets 0, 3, 6, 8.
  const int begins[] = {0, 3, 6, 8};
  const int ends[] = {3, 6, 8, 10};
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(split_evenly(10, 4, p).begin, begins[p]) << "part " << p;
    EXPECT_EQ(split_evenly(10, 4, p).end, ends[p]) << "part " << p;
  }
}

TEST(SysSplitEvenly, PartsCoverEveryItemOnce) {
  for (int items = 1; items <= 13; ++items) {
    for (int parts = 1; parts <= items; ++parts) {
      int next = 0;
      for (int p = 0; p < parts; ++p) {
        IndexRange r = split_evenly(items, parts, p);
        EXPECT_EQ(r.begin, next) << items << " items, " << parts << " parts, part " << p;
        EXPECT_GE(r.size(), items / parts);
        EXPECT_LE(r.size(), items / parts + 1);
        next = r.end;
      }
      EXPECT_EQ(next, items) << items << " items, " << parts << " parts";
    }
  }
}

TEST(SysSplitEvenly, MorePartsThanItemsShareRoundRobin) {
  // 2 items, 5 parts: items 0, 1, 0, 1, 0.
  const int expected[] = {0, 1, 0, 1, 0};
  for (int p = 0; p < 5; ++p) {
    IndexRange r = split_evenly(2, 5, p);
    EXPECT_EQ(r.begin, expected[p]) << "part " << p;
    EXPECT_EQ(r.size(), 1) << "part " << p;
  }
  EXPECT_EQ(split_evenly(0, 3, 1).size(), 0);
}

TEST(SysSplitEvenly, BadPartIsAnInvariantFailure) {
  EXPECT_THROW(split_evenly(4, 2, 2), InternalError);
  EXPECT_THROW(split_evenly(4, 0, 0), InternalError);
}

TEST(SysIndexList, Formatting) {
  EXPECT_EQ(format_index_list({}), "");
  EXPECT_EQ(format_index_list({1}), "1");
  EXPECT_EQ(format_index_list({3, 0, 1, 2}), "0-3");
  EXPECT_EQ(format_index_list({0, 1, 2, 3, 6, 8, 9, 9}), "0-3,6,8-9");
}

// Two NUMA nodes (OS indices 0 and 1) of 4 two-way SMT cores each; core k has PUs k and k + 8.
HostLayout two_socket_host() {
  HostLayout h;
  h.numa_os_indices = {0, 1};
  for (int k = 0; k < 8; ++k) h.cores.push_back(CoreInfo{k, {k, k + 8}, k / 4});
  return h;
}

TEST(SysPlanSynthetic, CoreModeSplitsContiguously) {
  HostLayout h = two_socket_host();
  BindingPlan r0 = plan_binding_on(h, Binding::Core, 0, 3, 0);
  BindingPlan r2 = plan_binding_on(h, Binding::Core, 2, 3, 0);
  EXPECT_EQ(r0.cores, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r0.description, "cores 0-2");
  EXPECT_EQ(r2.cores, (std::vector<int>{6, 7}));
  EXPECT_EQ(r2.description, "cores 6-7");
}

TEST(SysPlanSynthetic, NumaModeGivesWholeNodes) {
  HostLayout h = two_socket_host();
  BindingPlan one = plan_binding_on(h, Binding::Numa, 0, 1, 0);
  EXPECT_EQ(one.cores.size(), 8u);
  EXPECT_EQ(one.description, "numa 0-1 (cores 0-7)");
  BindingPlan r1 = plan_binding_on(h, Binding::Numa, 1, 2, 0);
  EXPECT_EQ(r1.cores, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(r1.description, "numa 1 (cores 4-7)");
  // Three ranks on two nodes: rank 2 shares node 0 with rank 0.
  BindingPlan r2of3 = plan_binding_on(h, Binding::Numa, 2, 3, 0);
  EXPECT_EQ(r2of3.description, "numa 0 (cores 0-3)");
}

TEST(SysPlanSynthetic, NumaModeSkipsMemoryOnlyNodes) {
  HostLayout h = two_socket_host();
  h.numa_os_indices.push_back(2);  // e.g. a CXL or HBM node with no cores
  BindingPlan r1 = plan_binding_on(h, Binding::Numa, 1, 2, 0);
  EXPECT_EQ(r1.description, "numa 1 (cores 4-7)");
}

TEST(SysPlanSynthetic, DefaultThreadsFollowThePlan) {
  BindingPlan plan = plan_binding_on(two_socket_host(), Binding::Core, 0, 3, 0);
  EXPECT_EQ(default_threads(plan, 0, 3), 3);
}

// This machine: 2 cores, 1 NUMA node (see docs/machine-notes.md). Tests that need that shape skip
// elsewhere rather than assert a different machine's layout.
class SysPlanHere : public ::testing::Test {
 protected:
  void SetUp() override {
    if (host_core_count() != 2) GTEST_SKIP() << "expects a 2-core host, found " << host_core_count() << " cores";
  }
};

TEST_F(SysPlanHere, OneRankGetsBothCores) {
  BindingPlan plan = plan_binding(Binding::Core, 0, 1, 0);
  EXPECT_EQ(plan.cores.size(), 2u);
  EXPECT_NE(plan.cores[0], plan.cores[1]);
  EXPECT_EQ(default_threads(plan, 0, 1), 2);
  BindingPlan numa = plan_binding(Binding::Numa, 0, 1, 0);
  EXPECT_EQ(numa.cores, plan.cores);
}

TEST_F(SysPlanHere, TwoRanksGetOneDistinctCoreEach) {
  BindingPlan r0 = plan_binding(Binding::Core, 0, 2, 0);
  BindingPlan r1 = plan_binding(Binding::Core, 1, 2, 0);
  ASSERT_EQ(r0.cores.size(), 1u);
  ASSERT_EQ(r1.cores.size(), 1u);
  EXPECT_NE(r0.cores[0], r1.cores[0]);
  EXPECT_EQ(r0.description, "cores " + std::to_string(r0.cores[0]));
}

TEST_F(SysPlanHere, FourRanksShareRoundRobin) {
  std::vector<int> core_of_rank;
  for (int r = 0; r < 4; ++r) {
    BindingPlan p = plan_binding(Binding::Core, r, 4, 0);
    ASSERT_EQ(p.cores.size(), 1u) << "rank " << r;
    core_of_rank.push_back(p.cores[0]);
  }
  EXPECT_NE(core_of_rank[0], core_of_rank[1]);
  EXPECT_EQ(core_of_rank[0], core_of_rank[2]);
  EXPECT_EQ(core_of_rank[1], core_of_rank[3]);
}

TEST_F(SysPlanHere, NoneBindsNothingAndSharesThreads) {
  BindingPlan plan = plan_binding(Binding::None, 0, 1, 0);
  EXPECT_TRUE(plan.cores.empty());
  EXPECT_EQ(plan.description, "none");
  EXPECT_EQ(default_threads(plan, 0, 1), 2);
  EXPECT_EQ(default_threads(plan, 1, 2), 1);
  EXPECT_EQ(default_threads(plan, 3, 4), 1);  // never zero, even with more ranks than cores
  EXPECT_TRUE(bind_this_process(plan));       // nothing to do is not a failure
  EXPECT_TRUE(bind_this_thread(plan, 0));
}

// The CPUs the calling thread may run on.
std::vector<int> thread_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(SysBindThread, ThreadRunsOnlyOnItsCore) {
  BindingPlan plan = plan_binding(Binding::Core, 0, 1, 0);
  ASSERT_FALSE(plan.cores.empty());
  // Thread index past the end wraps around: thread n+1 gets the plan's core 1 (or 0 on a 1-core host).
  const int thread_index = static_cast<int>(plan.cores.size()) + 1;
  const int expected_core = plan.cores[1 % plan.cores.size()];
  std::vector<int> expected_cpus;
  for (const CoreInfo& c : HostTopology::instance().layout().cores) {
    if (c.os_index == expected_core) expected_cpus = c.pu_os_indices;
  }
  bool bound = false;
  std::vector<int> cpus;
  // A fresh thread, so the test process itself stays unbound.
  std::thread worker([&] {
    bound = bind_this_thread(plan, thread_index);
    cpus = thread_affinity();
  });
  worker.join();
  if (!bound) GTEST_SKIP() << "the OS refused thread binding here (container?)";
  EXPECT_EQ(cpus, expected_cpus);
  EXPECT_EQ(cpus.front(), expected_core);
}

TEST(SysBindProcess, ProcessRunsOnThePlansCores) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof(original), &original), 0);
  BindingPlan plan = plan_binding(Binding::Core, host_core_count() > 1 ? 1 : 0, host_core_count() > 1 ? 2 : 1, 0);
  bool bound = bind_this_process(plan);
  std::vector<int> cpus = thread_affinity();
  sched_setaffinity(0, sizeof(original), &original);  // the test binary is single-threaded here
  if (!bound) GTEST_SKIP() << "the OS refused process binding here (container?)";
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(cpus.front(), plan.cores.front());
}

}  // namespace
}  // namespace glacier::sys
