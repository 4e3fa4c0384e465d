// Pipeline message encoding. Plain memcpy of trivially copyable records after a checked header:
// every rank of a job runs the same binary on the same architecture.
#include "pipeline/wire.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "compute/top_logprobs.h"
#include "kernels/crc32c.h"
#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace glacier::pipeline {
namespace {

constexpr uint32_t kMagic = 0x474c4332;  // "GLC2": sealed with checksums

// One header for both directions. The sender fills every field, then seals: body_crc over every byte
// after the header, header_crc over the header's bytes before it (body_crc included).
struct Header {
  uint32_t magic;
  uint8_t kind;
  uint8_t codec;
  uint16_t reserved;
  int64_t mb_id;
  int32_t n_chunks;
  int32_t n_tokens;  // forward: the micro-batch's tokens; back: its scored targets
  int32_t n_embd;    // forward micro-batches only
  uint32_t body_crc;
  uint32_t reserved2;
  uint32_t header_crc;
};
static_assert(sizeof(Header) == 40 && offsetof(Header, header_crc) == 36, "no padding: every byte is checksummed");
static_assert(std::is_trivially_copyable_v<compute::Chunk>);
static_assert(std::is_trivially_copyable_v<compute::ChunkResult>);
static_assert(std::is_trivially_copyable_v<compute::TokenBias>);
static_assert(std::is_trivially_copyable_v<compute::SlotCopy>);

// Bytes of the first chunks' sequence settings and the slot copies in a forward message: their three
// counts, then the entries.
size_t settings_bytes(size_t n_biases, size_t n_mask, size_t n_copies) {
  return 3 * sizeof(int32_t) + n_biases * sizeof(compute::TokenBias) + n_mask * sizeof(int32_t) +
         n_copies * sizeof(compute::SlotCopy);
}

// Bytes of a back message's extra draws (n samples): their count, then tokens and log-probs.
size_t samples_bytes(size_t n_extra) { return sizeof(int32_t) + n_extra * (sizeof(int32_t) + sizeof(float)); }

template <typename T>
void put(std::vector<uint8_t>& out, size_t& at, const T* src, size_t n) {
  if (n == 0) return;  // an empty vector's data() may be null, which memcpy must not see
  std::memcpy(out.data() + at, src, n * sizeof(T));
  at += n * sizeof(T);
}
template <typename T>
void get(const uint8_t* data, size_t bytes, size_t& at, T* dst, size_t n) {
  GLACIER_ASSERT(at + n * sizeof(T) <= bytes, "pipeline message shorter than its header says");
  if (n == 0) return;
  std::memcpy(dst, data + at, n * sizeof(T));
  at += n * sizeof(T);
}

void seal(std::vector<uint8_t>& msg) {
  Header h;
  std::memcpy(&h, msg.data(), sizeof h);
  h.body_crc = kernels::crc32c(msg.data() + sizeof h, msg.size() - sizeof h);
  h.header_crc = kernels::crc32c(&h, offsetof(Header, header_crc));
  std::memcpy(msg.data(), &h, sizeof h);
}

Header zero_header(MessageKind kind, int64_t mb_id) {
  Header h;
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.mb_id = mb_id;
  return h;
}

}  // namespace

const char* codec_name(WireCodec c) {
  switch (c) {
    case WireCodec::F32: return "f32";
    case WireCodec::F16: return "f16";
    case WireCodec::BF16: return "bf16";
    case WireCodec::Int8: return "int8";
  }
  return "?";
}

size_t payload_bytes(WireCodec c, int64_t n_tokens, int64_t n_embd) {
  switch (c) {
    case WireCodec::F32: return static_cast<size_t>(n_tokens * n_embd * 4);
    case WireCodec::F16:
    case WireCodec::BF16: return static_cast<size_t>(n_tokens * n_embd * 2);
    case WireCodec::Int8: return static_cast<size_t>(n_tokens * (n_embd + 4));
  }
  return 0;
}

// A fault message in place of a micro-batch must fit the receive buffers posted for one.
size_t max_forward_bytes(int32_t max_tokens, int32_t n_embd) {
  return sizeof(Header) + std::max(kMaxFaultReportBytes,
                                   static_cast<size_t>(max_tokens) * (sizeof(compute::Chunk) + 2 * sizeof(int32_t)) +
                                       settings_bytes(compute::kMaxBiasesPerMicroBatch, compute::kMaxMaskPerMicroBatch,
                                                      compute::kMaxCopiesPerMicroBatch) +
                                       payload_bytes(WireCodec::F32, max_tokens, n_embd));
}

// Every token of a micro-batch can be a chunk with a sampled token and its alternatives, or a target.
size_t max_back_bytes(int32_t max_tokens) {
  const size_t per_token = sizeof(compute::ChunkResult) + sizeof(float) + 1 +
                           static_cast<size_t>(compute::kMaxTopLogprobs) * (sizeof(int32_t) + sizeof(float));
  return sizeof(Header) + std::max(kMaxFaultReportBytes, sizeof(int32_t) + static_cast<size_t>(max_tokens) * per_token +
                                                             samples_bytes(compute::kMaxExtraSamplesPerMicroBatch));
}

void encode_activations(WireCodec c, const float* x, int64_t n, int64_t e, uint8_t* out) {
  switch (c) {
    case WireCodec::F32:
      std::memcpy(out, x, static_cast<size_t>(n * e) * 4);
      return;
    case WireCodec::F16:
    case WireCodec::BF16:
      for (int64_t i = 0; i < n * e; ++i) {
        const uint16_t h = c == WireCodec::F16 ? kernels::f32_to_fp16(x[i]) : kernels::f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case WireCodec::Int8:
      // Symmetric per token: scale = amax / 127, so the token's largest value is exact.
      for (int64_t t = 0; t < n; ++t) {
        const float* row = x + t * e;
        uint8_t* dst = out + t * (e + 4);
        float amax = 0.0f;
        for (int64_t i = 0; i < e; ++i) amax = std::max(amax, std::fabs(row[i]));
        const float scale = amax / 127.0f;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        std::memcpy(dst, &scale, 4);
        for (int64_t i = 0; i < e; ++i)
          dst[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(std::clamp(row[i] * inv, -127.0f, 127.0f))));
      }
      return;
  }
}

void decode_activations(WireCodec c, const uint8_t* in, int64_t n, int64_t e, float* x) {
  switch (c) {
    case WireCodec::F32:
      std::memcpy(x, in, static_cast<size_t>(n * e) * 4);
      return;
    case WireCodec::F16:
    case WireCodec::BF16:
      for (int64_t i = 0; i < n * e; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        x[i] = c == WireCodec::F16 ? kernels::fp16_to_f32(h) : kernels::bf16_to_f32(h);
      }
      return;
    case WireCodec::Int8:
      for (int64_t t = 0; t < n; ++t) {
        const uint8_t* src = in + t * (e + 4);
        float scale;
        std::memcpy(&scale, src, 4);
        for (int64_t i = 0; i < e; ++i) x[t * e + i] = scale * static_cast<float>(static_cast<int8_t>(src[4 + i]));
      }
      return;
  }
}

size_t encode_forward(const compute::MicroBatch& mb, const float* x, int32_t n_embd, WireCodec codec,
                      std::vector<uint8_t>& out) {
  Header h = zero_header(MessageKind::MicroBatch, mb.id);
  h.codec = static_cast<uint8_t>(codec);
  h.n_chunks = static_cast<int32_t>(mb.chunks.size());
  h.n_tokens = mb.n_tokens();
  h.n_embd = n_embd;
  GLACIER_ASSERT(mb.biases.size() <= static_cast<size_t>(compute::kMaxBiasesPerMicroBatch) &&
                     mb.min_mask.size() <= static_cast<size_t>(compute::kMaxMaskPerMicroBatch) &&
                     mb.copies.size() <= static_cast<size_t>(compute::kMaxCopiesPerMicroBatch),
                 "a micro-batch's sequence settings and slot copies within the receive buffers' bounds");
  const size_t payload = payload_bytes(codec, mb.n_tokens(), n_embd);
  const size_t total = sizeof h + mb.chunks.size() * sizeof(compute::Chunk) + 2 * mb.tokens.size() * sizeof(int32_t) +
                       settings_bytes(mb.biases.size(), mb.min_mask.size(), mb.copies.size()) + payload;
  out.resize(total);
  size_t at = 0;
  put(out, at, &h, 1);
  put(out, at, mb.chunks.data(), mb.chunks.size());
  put(out, at, mb.tokens.data(), mb.tokens.size());
  put(out, at, mb.targets.data(), mb.targets.size());
  const int32_t counts[3] = {static_cast<int32_t>(mb.biases.size()), static_cast<int32_t>(mb.min_mask.size()),
                             static_cast<int32_t>(mb.copies.size())};
  put(out, at, counts, 3);
  put(out, at, mb.biases.data(), mb.biases.size());
  put(out, at, mb.min_mask.data(), mb.min_mask.size());
  put(out, at, mb.copies.data(), mb.copies.size());
  encode_activations(codec, x, mb.n_tokens(), n_embd, out.data() + at);
  seal(out);
  return payload;
}

std::vector<uint8_t> encode_shutdown() {
  const Header h = zero_header(MessageKind::Shutdown, -1);
  std::vector<uint8_t> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  seal(out);
  return out;
}

void encode_fault(int64_t mb_id, const std::string& report, std::vector<uint8_t>& out) {
  const Header h = zero_header(MessageKind::Fault, mb_id);
  const size_t n = std::min(report.size(), kMaxFaultReportBytes);
  out.resize(sizeof h + n);
  size_t at = 0;
  put(out, at, &h, 1);
  put(out, at, report.data(), n);
  seal(out);
}

std::string fault_report(const uint8_t* data, size_t bytes) {
  GLACIER_ASSERT(bytes >= sizeof(Header), "fault message holds a header");
  return std::string(reinterpret_cast<const char*>(data) + sizeof(Header), bytes - sizeof(Header));
}

MessageCheck check_message(const uint8_t* data, size_t bytes) {
  MessageCheck c;
  if (bytes < sizeof(Header)) {
    c.status = MessageCheck::Status::Short;
    return c;
  }
  Header h;
  std::memcpy(&h, data, sizeof h);
  c.sent = h.header_crc;
  c.found = kernels::crc32c(data, offsetof(Header, header_crc));
  if (c.found != c.sent) {
    c.status = MessageCheck::Status::HeaderDamaged;
    return c;
  }
  c.mb_id = h.mb_id;
  c.body_bytes = bytes - sizeof h;
  c.sent = h.body_crc;
  c.found = kernels::crc32c(data + sizeof h, bytes - sizeof h);
  if (c.found != c.sent) c.status = MessageCheck::Status::BodyDamaged;
  return c;
}

void damage_message(std::vector<uint8_t>& msg) {
  GLACIER_ASSERT(!msg.empty(), "a message to damage");
  msg.back() ^= 0xFF;
}

MessageKind decode_forward(const uint8_t* data, size_t bytes, int32_t n_embd, compute::MicroBatch& mb, float* x) {
  Header h;
  size_t at = 0;
  get(data, bytes, at, &h, 1);
  GLACIER_ASSERT(h.magic == kMagic, "pipeline message with a bad magic number");
  const auto kind = static_cast<MessageKind>(h.kind);
  if (kind == MessageKind::Shutdown || kind == MessageKind::Fault) return kind;
  GLACIER_ASSERT(kind == MessageKind::MicroBatch, "pipeline message of a known kind");
  GLACIER_ASSERT(h.n_embd == n_embd && h.n_chunks >= 0 && h.n_tokens >= 0, "pipeline message header consistent");
  mb.id = h.mb_id;
  mb.chunks.resize(static_cast<size_t>(h.n_chunks));
  mb.tokens.resize(static_cast<size_t>(h.n_tokens));
  mb.targets.resize(static_cast<size_t>(h.n_tokens));
  get(data, bytes, at, mb.chunks.data(), mb.chunks.size());
  get(data, bytes, at, mb.tokens.data(), mb.tokens.size());
  get(data, bytes, at, mb.targets.data(), mb.targets.size());
  int32_t counts[3] = {0, 0, 0};
  get(data, bytes, at, counts, 3);
  GLACIER_ASSERT(counts[0] >= 0 && counts[0] <= compute::kMaxBiasesPerMicroBatch && counts[1] >= 0 &&
                     counts[1] <= compute::kMaxMaskPerMicroBatch && counts[2] >= 0 &&
                     counts[2] <= compute::kMaxCopiesPerMicroBatch,
                 "pipeline message's sequence settings and slot copies within bounds");
  mb.biases.resize(static_cast<size_t>(counts[0]));
  mb.min_mask.resize(static_cast<size_t>(counts[1]));
  mb.copies.resize(static_cast<size_t>(counts[2]));
  get(data, bytes, at, mb.biases.data(), mb.biases.size());
  get(data, bytes, at, mb.min_mask.data(), mb.min_mask.size());
  get(data, bytes, at, mb.copies.data(), mb.copies.size());
  const auto codec = static_cast<WireCodec>(h.codec);
  GLACIER_ASSERT(at + payload_bytes(codec, h.n_tokens, n_embd) == bytes, "pipeline payload size matches");
  decode_activations(codec, data + at, h.n_tokens, n_embd, x);
  return MessageKind::MicroBatch;
}

void encode_back(const compute::MicroBatchResult& r, std::vector<uint8_t>& out) {
  Header h = zero_header(MessageKind::MicroBatch, r.id);
  h.n_chunks = static_cast<int32_t>(r.chunks.size());
  h.n_tokens = static_cast<int32_t>(r.target_logprobs.size());
  GLACIER_ASSERT(r.top_ids.size() == r.top_logprobs.size(), "one log-prob per top token id");
  const auto n_top = static_cast<int32_t>(r.top_ids.size());
  GLACIER_ASSERT(r.sample_tokens.size() == r.sample_logprobs.size() &&
                     r.sample_tokens.size() <= static_cast<size_t>(compute::kMaxExtraSamplesPerMicroBatch),
                 "a result's extra draws within the receive buffers' bounds");
  out.resize(sizeof h + r.chunks.size() * sizeof(compute::ChunkResult) + r.target_logprobs.size() * (sizeof(float) + 1) +
             sizeof n_top + r.top_ids.size() * (sizeof(int32_t) + sizeof(float)) + samples_bytes(r.sample_tokens.size()));
  size_t at = 0;
  put(out, at, &h, 1);
  put(out, at, r.chunks.data(), r.chunks.size());
  put(out, at, r.target_logprobs.data(), r.target_logprobs.size());
  put(out, at, r.target_greedy.data(), r.target_greedy.size());
  put(out, at, &n_top, 1);
  put(out, at, r.top_ids.data(), r.top_ids.size());
  put(out, at, r.top_logprobs.data(), r.top_logprobs.size());
  const int32_t n_extra = static_cast<int32_t>(r.sample_tokens.size());
  put(out, at, &n_extra, 1);
  put(out, at, r.sample_tokens.data(), r.sample_tokens.size());
  put(out, at, r.sample_logprobs.data(), r.sample_logprobs.size());
  seal(out);
}

MessageKind decode_back(const uint8_t* data, size_t bytes, compute::MicroBatchResult& r) {
  Header h;
  size_t at = 0;
  get(data, bytes, at, &h, 1);
  GLACIER_ASSERT(h.magic == kMagic, "back message with a bad magic number");
  const auto kind = static_cast<MessageKind>(h.kind);
  if (kind == MessageKind::Fault) return kind;
  GLACIER_ASSERT(kind == MessageKind::MicroBatch && h.n_chunks >= 0 && h.n_tokens >= 0, "back message header consistent");
  r.id = h.mb_id;
  r.chunks.resize(static_cast<size_t>(h.n_chunks));
  r.target_logprobs.resize(static_cast<size_t>(h.n_tokens));
  r.target_greedy.resize(static_cast<size_t>(h.n_tokens));
  get(data, bytes, at, r.chunks.data(), r.chunks.size());
  get(data, bytes, at, r.target_logprobs.data(), r.target_logprobs.size());
  get(data, bytes, at, r.target_greedy.data(), r.target_greedy.size());
  int32_t n_top = 0;
  get(data, bytes, at, &n_top, 1);
  GLACIER_ASSERT(n_top >= 0, "back message's top log-prob count >= 0");
  r.top_ids.resize(static_cast<size_t>(n_top));
  r.top_logprobs.resize(static_cast<size_t>(n_top));
  get(data, bytes, at, r.top_ids.data(), r.top_ids.size());
  get(data, bytes, at, r.top_logprobs.data(), r.top_logprobs.size());
  int32_t n_extra = 0;
  get(data, bytes, at, &n_extra, 1);
  GLACIER_ASSERT(n_extra >= 0 && n_extra <= compute::kMaxExtraSamplesPerMicroBatch, "back message's draws within bounds");
  r.sample_tokens.resize(static_cast<size_t>(n_extra));
  r.sample_logprobs.resize(static_cast<size_t>(n_extra));
  get(data, bytes, at, r.sample_tokens.data(), r.sample_tokens.size());
  get(data, bytes, at, r.sample_logprobs.data(), r.sample_logprobs.size());
  return kind;
}

}  // namespace glacier::pipeline
