// The model file's SHA-256, hashed once per file: a small cache under $XDG_CACHE_HOME/glacier
// (~/.cache/glacier) maps a file's identity to its digest, so that every later start or --resume of
// the same unchanged model reads one line instead of gigabytes.
#pragma once
#include <string>

#include "app/sha256.h"

namespace glacier::app {

// $XDG_CACHE_HOME/glacier/model-sha256, else $HOME/.cache/glacier/model-sha256; "" when neither
// variable is set (then nothing is cached).
std::string model_digest_cache_path();

struct FileDigest {
  std::string sha256;  // lower-case hex
  bool from_cache = false;
};

// SHA-256 of the file at `path`: the cached digest when an entry matches the file's device, inode,
// size, modification time and status-change time (ns; a file rewritten in place changes them), else
// computed with sha256_file and recorded. Cache trouble (unreadable, unwritable, malformed lines)
// never fails: it costs a rehash and a debug-level log line. Throws InputError naming the path when
// the file itself cannot be read.
// `progress` hears from a computation (not from a cache hit).
FileDigest cached_sha256_file(const std::string& path, const std::string& cache_path = model_digest_cache_path(),
                              const HashProgress& progress = {});

}  // namespace glacier::app
