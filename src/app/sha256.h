// SHA-256 of byte strings and files through OpenSSL's libcrypto (SHA-NI / AVX2 code where the CPU has
// it): the model file's digest is recorded as provenance in the results file and compared on --resume.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace glacier::app {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void reset();
  void update(const void* data, size_t size);
  // Pads, returns the digest and resets, so one object can hash several messages in turn.
  Digest finish();

  static std::string to_hex(const Digest& digest);

 private:
  struct FreeContext {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> context_;
};

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

// Told the bytes hashed so far and the file's size, every 64 MiB (a long hash is a phase the start-up
// watchdog must hear from).
using HashProgress = std::function<void(uint64_t done, uint64_t total)>;

// Lower-case hex digest of a file's contents, read in 1 MiB chunks (model files are gigabytes).
// Throws InputError naming the path when the file cannot be opened or read.
std::string sha256_file(const std::string& path, const HashProgress& progress = {});

}  // namespace glacier::app
