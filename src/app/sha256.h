// SHA-256 (FIPS 180-4) of byte strings and files: the model file's digest is recorded as provenance in
// the results file and compared on --resume, without depending on a crypto library.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glacier::app {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256() { reset(); }
  void reset();
  void update(const void* data, size_t size);
  // Pads, returns the digest and resets, so one object can hash several messages in turn.
  Digest finish();

  static std::string to_hex(const Digest& digest);

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_{};
  std::array<uint8_t, 64> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

// Lower-case hex digest of a file's contents, read in 1 MiB chunks (model files are gigabytes).
// Throws InputError naming the path when the file cannot be opened or read.
std::string sha256_file(const std::string& path);

}  // namespace glacier::app
