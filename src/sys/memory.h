// Memory figures for planning and reporting: what this process may still allocate (host and cgroup
// limits) and its resident set. Read from /proc and cgroupfs, never from hwloc (it misreports NUMA memory).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace glacier::sys {

// Bytes this process can still allocate: the smaller of MemAvailable and the headroom left under
// every cgroup memory limit that applies to it (v2 memory.max or v1 memory.limit_in_bytes).
uint64_t available_memory_bytes();
// Physical memory usable by this process: MemTotal, capped by the tightest cgroup limit.
uint64_t total_memory_bytes();
// High-water mark of the resident set (VmHWM, or getrusage when /proc is unreadable).
uint64_t peak_rss_bytes();
// Current resident set (VmRSS); 0 when /proc is unreadable.
uint64_t current_rss_bytes();

// The two /proc/meminfo figures we use, in bytes.
struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};
// Parses /proc/meminfo text; `source` names the file in error messages. Throws InputError when
// MemTotal or MemAvailable is missing or malformed.
MemInfo parse_meminfo(const std::string& text, const std::string& source = "/proc/meminfo");

// Reads a "Key:   1234 kB" field of /proc/<pid>/status in bytes; nullopt when the key is absent.
// Throws InputError when the key is present but its value is malformed.
std::optional<uint64_t> parse_status_field_bytes(const std::string& text, const std::string& key,
                                                 const std::string& source = "/proc/self/status");

// Parses a cgroup memory limit file: "max" (v2) means no limit (nullopt), otherwise a byte count.
// Throws InputError naming `source` for anything else.
std::optional<uint64_t> parse_cgroup_limit(const std::string& text, const std::string& source = "cgroup limit");

// The cgroup paths of this process from /proc/self/cgroup text: the v2 path ("0::/path") and the
// v1 memory controller path ("N:...memory...:/path"); either may be absent.
struct CgroupMembership {
  std::optional<std::string> unified_path;
  std::optional<std::string> v1_memory_path;
};
CgroupMembership parse_cgroup_membership(const std::string& proc_self_cgroup_text);

// Smallest (limit - usage) over the cgroups of `membership` and their ancestors, found under
// `cgroupfs_root` (normally /sys/fs/cgroup); nullopt when no limit applies. Directories that do
// not exist are skipped, so a container that sees its own cgroup as the root is handled too.
std::optional<uint64_t> cgroup_headroom_bytes(const std::filesystem::path& cgroupfs_root,
                                              const CgroupMembership& membership);
// Smallest limit (without usage) over the same cgroups; nullopt when unlimited.
std::optional<uint64_t> cgroup_limit_bytes(const std::filesystem::path& cgroupfs_root,
                                           const CgroupMembership& membership);

}  // namespace glacier::sys
