// The byte layout of pipeline messages. Forward (stage s -> s+1): a fixed header, the chunks
// (slot, positions, token count, what the last stage must do), the tokens and targets, the first chunks'
// logit biases and min_tokens ids, the slot copies, then the activations [n_tokens x n_embd] in the wire
// codec. Back (last stage -> driver): per chunk the sampled token and log-prob, scored log-probs, the
// sampled tokens' top alternatives, and the draws of a prompt's further samples.
// All ranks share one architecture (a cluster). Every message is sealed with CRC32C checksums of its
// header and its body, checked on arrival.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/message_tags.h"
#include "compute/microbatch.h"

namespace glacier::pipeline {

enum class WireCodec : uint8_t { F32 = 0, F16 = 1, BF16 = 2, Int8 = 3 };
const char* codec_name(WireCodec c);
// Payload bytes of n_tokens activations: int8 carries one f32 scale per token (n_embd + 4 bytes).
size_t payload_bytes(WireCodec c, int64_t n_tokens, int64_t n_embd);

// Fault: in place of a micro-batch (or its result), the report of a damaged message found upstream,
// passed on to the driver so the job ends cleanly on every rank.
enum class MessageKind : uint8_t { MicroBatch = 0, Shutdown = 1, Fault = 2 };

constexpr int kTagForward = comm::tags::kForward;
constexpr int kTagBack = comm::tags::kBack;

// A fault report longer than this is cut (the receive buffers have room for it).
constexpr size_t kMaxFaultReportBytes = 1024;

// Largest forward / back message for micro-batches of at most max_tokens tokens.
size_t max_forward_bytes(int32_t max_tokens, int32_t n_embd);
size_t max_back_bytes(int32_t max_tokens);

// Encodes a forward message into `out` (resized; capacity reused) and returns its payload size.
size_t encode_forward(const compute::MicroBatch& mb, const float* x, int32_t n_embd, WireCodec codec,
                      std::vector<uint8_t>& out);
std::vector<uint8_t> encode_shutdown();
// Decodes a forward message of `bytes` bytes that passed check_message(); returns its kind. For
// MicroBatch fills mb and x (x must hold n_tokens x n_embd floats). Throws InternalError on a malformed
// message (a bug, not user input).
MessageKind decode_forward(const uint8_t* data, size_t bytes, int32_t n_embd, compute::MicroBatch& mb, float* x);

void encode_back(const compute::MicroBatchResult& r, std::vector<uint8_t>& out);
// Decodes a back message that passed check_message(): MicroBatch fills r, Fault leaves it alone.
MessageKind decode_back(const uint8_t* data, size_t bytes, compute::MicroBatchResult& r);

// A fault report for micro-batch mb_id (-1: unknown), in either direction; fault_report() reads it back.
void encode_fault(int64_t mb_id, const std::string& report, std::vector<uint8_t>& out);
std::string fault_report(const uint8_t* data, size_t bytes);

// What the checksums of a received message say. The header's checksum covers the micro-batch id, so
// a report can trust it whenever the header is sound.
struct MessageCheck {
  enum class Status { Sound, Short, HeaderDamaged, BodyDamaged };
  Status status = Status::Sound;
  int64_t mb_id = -1;            // when the header is sound
  uint32_t sent = 0, found = 0;  // the damaged part's checksum as sealed and as computed on arrival
  size_t body_bytes = 0;         // the bytes after the header
};
MessageCheck check_message(const uint8_t* data, size_t bytes);
// Testing aid: flips every bit of the message's last byte (the payload's end, or the header's checksum
// of a header-only message), as a faulty link would after the sender sealed it.
void damage_message(std::vector<uint8_t>& msg);

// Activation codecs on their own (for tests and the wire-size figures).
void encode_activations(WireCodec c, const float* x, int64_t n_tokens, int64_t n_embd, uint8_t* out);
void decode_activations(WireCodec c, const uint8_t* in, int64_t n_tokens, int64_t n_embd, float* x);

}  // namespace glacier::pipeline
