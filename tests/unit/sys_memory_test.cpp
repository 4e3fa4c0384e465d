// Memory figures: /proc and cgroupfs parsers on literal text, the cgroup walk on a fake cgroupfs
// tree, and sanity of the live figures against independent sources (sysconf, getrusage).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/input_error.h"
#include "common/test_env.h"
#include "sys/memory.h"
#include "util/error.h"

namespace glacier::sys {
namespace {

namespace fs = std::filesystem;
using glacier::testing::expect_input_error;
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

const char* kMeminfo =
    "MemTotal:       24683584 kB\n"
    "MemFree:        24162600 kB\n"
    "MemAvailable:   24273456 kB\n"
    "Buffers:            1632 kB\n"
    "HugePages_Total:       0\n";

TEST(SysMemInfo, ReadsTotalAndAvailableInBytes) {
  MemInfo info = parse_meminfo(kMeminfo);
  EXPECT_EQ(info.total_bytes, 24683584 * kKiB);
  EXPECT_EQ(info.available_bytes, 24273456 * kKiB);
}

TEST(SysMemInfo, MissingAvailableIsAnErrorNamingTheKey) {
  expect_input_error([&] { parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n", "fake/meminfo"); },
                     {"fake/meminfo", "MemAvailable"});
}

TEST(SysMemInfo, MalformedValueNamesLineAndWhatWasFound) {
  expect_input_error([&] { parse_meminfo("MemTotal: 1000 kB\nMemAvailable: lots kB\n", "fake/meminfo"); },
                     {"line 2", "lots"});
}

TEST(SysMemInfo, StatusFieldsAndAbsentKey) {
  const char* status =
      "Name:\tcat\n"
      "VmPeak:\t    8000 kB\n"
      "VmHWM:\t    2068 kB\n"
      "VmRSS:\t    1990 kB\n";
  EXPECT_EQ(parse_status_field_bytes(status, "VmHWM"), 2068 * kKiB);
  EXPECT_EQ(parse_status_field_bytes(status, "VmRSS"), 1990 * kKiB);
  EXPECT_FALSE(parse_status_field_bytes(status, "VmSwap").has_value());
  // A key is matched whole: "VmRSS" must not match a longer key that starts with it.
  EXPECT_FALSE(parse_status_field_bytes("VmRSSx:\t5 kB\n", "VmRSS").has_value());
}

TEST(SysCgroup, LimitParsing) {
  EXPECT_FALSE(parse_cgroup_limit("max\n").has_value());
  EXPECT_EQ(parse_cgroup_limit("1073741824\n"), 1073741824u);
  EXPECT_EQ(parse_cgroup_limit("9223372036854771712\n"), 9223372036854771712u);  // v1's "unlimited"
  EXPECT_THROW(parse_cgroup_limit("-1\n"), InputError);
  EXPECT_THROW(parse_cgroup_limit(""), InputError);
  expect_input_error([&] { parse_cgroup_limit("12 MB", "x/memory.max"); }, {"x/memory.max", "12 MB"});
}

TEST(SysCgroup, MembershipHybridAndUnified) {
  CgroupMembership hybrid = parse_cgroup_membership(
      "9:name=systemd:/\n"
      "4:memory:/process_api/abc\n"
      "2:cpu,cpuacct:/\n"
      "0::/\n");
  EXPECT_EQ(hybrid.v1_memory_path, "/process_api/abc");
  EXPECT_EQ(hybrid.unified_path, "/");

  CgroupMembership v2 = parse_cgroup_membership("0::/user.slice/job:42.scope\n");
  EXPECT_EQ(v2.unified_path, "/user.slice/job:42.scope");  // ':' inside the path survives
  EXPECT_FALSE(v2.v1_memory_path.has_value());

  CgroupMembership combined = parse_cgroup_membership("5:cpuset,memory:/a\n");
  EXPECT_EQ(combined.v1_memory_path, "/a");
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(SysCgroup, UnifiedWalkTakesTheTightestAncestor) {
  fs::path root = testing::scratch_dir("sys-cgroup-v2");
  // The parent's limit leaves less room than the leaf's, so the parent decides.
  write_file(root / "job/memory.max", "1000000\n");
  write_file(root / "job/memory.current", "600000\n");
  write_file(root / "job/step/memory.max", "max\n");
  write_file(root / "job/step/memory.current", "100\n");
  CgroupMembership m;
  m.unified_path = "/job/step";
  EXPECT_EQ(cgroup_headroom_bytes(root, m), 400000u);
  EXPECT_EQ(cgroup_limit_bytes(root, m), 1000000u);

  // Reclaimable page cache does not count against the headroom.
  write_file(root / "job/memory.stat", "anon 300000\ninactive_file 250000\n");
  EXPECT_EQ(cgroup_headroom_bytes(root, m), 650000u);
  fs::remove_all(root);
}

TEST(SysCgroup, V1WalkAndUnlimitedAndMissingDirectories) {
  fs::path root = testing::scratch_dir("sys-cgroup-v1");
  write_file(root / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  write_file(root / "memory/memory.usage_in_bytes", "260304896\n");
  write_file(root / "memory/slurm/memory.limit_in_bytes", "8000000000\n");
  write_file(root / "memory/slurm/memory.usage_in_bytes", "3000000000\n");
  CgroupMembership m;
  m.v1_memory_path = "/slurm/uid_0/job_7";  // the two deepest levels do not exist: skipped
  EXPECT_EQ(cgroup_headroom_bytes(root, m), 5000000000u);

  CgroupMembership none;
  EXPECT_FALSE(cgroup_headroom_bytes(root, none).has_value());
  CgroupMembership v2_only;
  v2_only.unified_path = "/";
  EXPECT_FALSE(cgroup_headroom_bytes(root, v2_only).has_value());  // no memory.max anywhere
  fs::remove_all(root);
}

TEST(SysMemoryLive, AvailableIsPositiveAndWithinPhysicalMemory) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  ASSERT_GT(page_size, 0);
  uint64_t physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  uint64_t available = available_memory_bytes();
  uint64_t total = total_memory_bytes();
  EXPECT_GT(available, 0u);
  EXPECT_LE(available, physical);
  EXPECT_LE(available, total);
  EXPECT_LE(total, physical);
}

TEST(SysMemoryLive, RssSeesATouchedBuffer) {
  constexpr size_t kBuffer = 64 * kMiB;
  // The kernel may account a few pages lazily or share zero pages; 1 MiB slack covers that.
  constexpr uint64_t kSlack = 1 * kMiB;
  std::vector<char> buffer(kBuffer);
  std::memset(buffer.data(), 1, buffer.size());
  uint64_t current = current_rss_bytes();
  uint64_t peak = peak_rss_bytes();
  EXPECT_GE(current + kSlack, kBuffer);
  EXPECT_GE(peak, current);

  struct rusage usage {};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  // getrusage reports the same high-water mark through another interface: they agree within slack.
  uint64_t rusage_peak = static_cast<uint64_t>(usage.ru_maxrss) * kKiB;
  EXPECT_LE(rusage_peak, peak + kSlack);
  EXPECT_LE(peak, rusage_peak + kSlack);
  EXPECT_EQ(buffer[kBuffer - 1], 1);
}

}  // namespace
}  // namespace glacier::sys
