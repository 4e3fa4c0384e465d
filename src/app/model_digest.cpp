// The digest cache: one text file of "device inode size mtime_ns ctime_ns sha256 path" lines after
// a format line, read whole, rewritten through a temporary file and rename() so that concurrent jobs
// never see half a file.
#include "app/model_digest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "app/sha256.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

constexpr const char* kFormatLine = "glacier model-sha256 cache 1";
// Oldest entries are dropped past this many: a handful of models per user, with room to spare.
constexpr size_t kMaxEntries = 64;

// What identifies one state of one file: a rewrite, an in-place copy or a touch changes it.
struct FileKey {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

struct Entry {
  FileKey key;
  std::string sha256;
  std::string path;  // for a reader of the cache only; the key decides
};

std::optional<FileKey> key_of(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  FileKey key;
  key.device = info.st_dev;
  key.inode = info.st_ino;
  key.size = static_cast<uint64_t>(info.st_size);
  key.mtime_ns = int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec;
  key.ctime_ns = int64_t{info.st_ctim.tv_sec} * 1000000000 + info.st_ctim.tv_nsec;
  return key;
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// One cache line, or nullopt when it is not exactly what write_cache writes.
std::optional<Entry> parse_entry(const std::string& line) {
  std::istringstream in(line);
  Entry e;
  if (!(in >> e.key.device >> e.key.inode >> e.key.size >> e.key.mtime_ns >> e.key.ctime_ns >> e.sha256)) return std::nullopt;
  if (!is_sha256_hex(e.sha256) || in.get() != ' ') return std::nullopt;
  std::getline(in, e.path);
  return e;
}

std::vector<Entry> read_cache(const std::string& cache_path) {
  std::vector<Entry> entries;
  std::ifstream in(cache_path);
  std::string line;
  if (!in || !std::getline(in, line)) return entries;
  if (line != kFormatLine) {
    GLACIER_LOG_DEBUG("%s: not a model digest cache (first line '%s'): ignored", cache_path.c_str(), line.c_str());
    return entries;
  }
  while (std::getline(in, line)) {
    if (auto e = parse_entry(line))
      entries.push_back(std::move(*e));
    else
      GLACIER_LOG_DEBUG("%s: malformed line ignored: '%s'", cache_path.c_str(), line.c_str());
  }
  return entries;
}

// Writes `entries` as the whole cache; false (with the reason logged at debug level) when it cannot.
bool write_cache(const std::string& cache_path, const std::vector<Entry>& entries) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(cache_path).parent_path(), ec);
  if (ec) {
    GLACIER_LOG_DEBUG("cannot create the folder of %s: %s", cache_path.c_str(), ec.message().c_str());
    return false;
  }
  const std::string temporary = cache_path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kFormatLine << "\n";
    for (const Entry& e : entries)
      out << e.key.device << ' ' << e.key.inode << ' ' << e.key.size << ' ' << e.key.mtime_ns << ' ' << e.key.ctime_ns
          << ' ' << e.sha256 << ' ' << e.path << "\n";
    out.flush();
    if (!out) {
      GLACIER_LOG_DEBUG("cannot write %s: %s", temporary.c_str(), std::strerror(errno));
      fs::remove(temporary, ec);
      return false;
    }
  }
  fs::rename(temporary, cache_path, ec);
  if (ec) {
    GLACIER_LOG_DEBUG("cannot replace %s: %s", cache_path.c_str(), ec.message().c_str());
    fs::remove(temporary, ec);
    return false;
  }
  return true;
}

// A path as one cache line can hold it (it is informational only).
std::string one_line(std::string path) {
  std::replace(path.begin(), path.end(), '\n', '?');
  return path;
}

}  // namespace

std::string model_digest_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/glacier/model-sha256";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/glacier/model-sha256";
  return "";
}

FileDigest cached_sha256_file(const std::string& path, const std::string& cache_path, const HashProgress& progress) {
  const std::optional<FileKey> before = key_of(path);
  if (!before) throw InputError(path + ": cannot open the file to compute its SHA-256: " + std::strerror(errno));
  std::vector<Entry> entries = cache_path.empty() ? std::vector<Entry>() : read_cache(cache_path);
  for (const Entry& e : entries)
    if (e.key == *before) return {e.sha256, true};

  FileDigest digest{sha256_file(path, progress), false};
  if (cache_path.empty()) {
    GLACIER_LOG_DEBUG("no $XDG_CACHE_HOME or $HOME: the SHA-256 of %s is not cached", path.c_str());
    return digest;
  }
  if (key_of(path) != before) {  // changed while it was read: the digest may be of neither state
    GLACIER_LOG_DEBUG("%s changed while its SHA-256 was computed: not cached", path.c_str());
    return digest;
  }
  // The same file in an older state is gone for good; the oldest entries make room.
  std::erase_if(entries, [&](const Entry& e) { return e.key.device == before->device && e.key.inode == before->inode; });
  entries.push_back({*before, digest.sha256, one_line(path)});
  if (entries.size() > kMaxEntries) entries.erase(entries.begin(), entries.end() - kMaxEntries);
  write_cache(cache_path, entries);
  return digest;
}

}  // namespace glacier::app
