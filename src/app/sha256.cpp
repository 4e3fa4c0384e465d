// SHA-256 through OpenSSL's EVP interface, which picks the CPU's fastest implementation; the file
// digest streams the file in 1 MiB chunks.
#include "app/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include "util/error.h"

namespace glacier::app {
namespace {

constexpr size_t kFileChunk = size_t{1} << 20;
constexpr uint64_t kProgressEvery = uint64_t{64} << 20;  // about 0.1 s of hashing: often enough for any watchdog

// OpenSSL fails only when out of memory or misconfigured: a program error, not bad input.
void require(int ok, const char* call) {
  if (ok != 1) throw std::runtime_error(std::string("OpenSSL ") + call + " failed while computing a SHA-256");
}

}  // namespace

void Sha256::FreeContext::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) throw std::runtime_error("OpenSSL EVP_MD_CTX_new failed (out of memory?)");
  reset();
}

Sha256::~Sha256() = default;

void Sha256::reset() { require(EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr), "EVP_DigestInit_ex"); }

void Sha256::update(const void* data, size_t size) {
  if (size > 0) require(EVP_DigestUpdate(context_.get(), data, size), "EVP_DigestUpdate");
}

Sha256::Digest Sha256::finish() {
  Digest digest;
  unsigned int length = 0;
  require(EVP_DigestFinal_ex(context_.get(), digest.data(), &length), "EVP_DigestFinal_ex");
  GLACIER_ASSERT(length == digest.size(), "SHA-256 digest of " + std::to_string(length) + " bytes");
  reset();
  return digest;
}

std::string Sha256::to_hex(const Digest& digest) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 hash;
  hash.update(data.data(), data.size());
  return Sha256::to_hex(hash.finish());
}

std::string sha256_file(const std::string& path, const HashProgress& progress) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) throw InputError(path + ": cannot open the file to compute its SHA-256: " + std::strerror(errno));
  std::error_code size_error;
  const uint64_t total = std::filesystem::file_size(path, size_error);
  std::vector<uint8_t> chunk(kFileChunk);
  Sha256 hash;
  uint64_t done = 0, reported = 0;
  for (;;) {
    const size_t got = std::fread(chunk.data(), 1, chunk.size(), file.get());
    hash.update(chunk.data(), got);
    done += got;
    if (progress && done - reported >= kProgressEvery) {
      progress(done, size_error ? 0 : total);
      reported = done;
    }
    if (got < chunk.size()) break;
  }
  if (std::ferror(file.get()))
    throw InputError(path + ": read error while computing its SHA-256: " + std::strerror(errno));
  return Sha256::to_hex(hash.finish());
}

}  // namespace glacier::app
