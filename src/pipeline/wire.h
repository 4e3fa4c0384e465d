// The byte layout of pipeline messages. Forward (stage s -> s+1): a fixed header, the chunks
// (slot, positions, token count, what the last stage must do), the tokens and targets, then the
// activations [n_tokens x n_embd] in the wire codec. Back (last stage -> driver): per chunk the
// sampled token and log-prob, and scored log-probs. All ranks share one architecture (a cluster).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compute/microbatch.h"

namespace glacier::pipeline {

enum class WireCodec : uint8_t { F32 = 0, F16 = 1, BF16 = 2, Int8 = 3 };
WireCodec parse_codec(const std::string& name);  // f32 | f16 | bf16 | int8 (InputError otherwise)
const char* codec_name(WireCodec c);
// Payload bytes of n_tokens activations: int8 carries one f32 scale per token (n_embd + 4 bytes).
size_t payload_bytes(WireCodec c, int64_t n_tokens, int64_t n_embd);

enum class MessageKind : uint8_t { MicroBatch = 0, Shutdown = 1 };

constexpr int kTagForward = 11;
constexpr int kTagBack = 12;

// Largest forward / back message for micro-batches of at most max_tokens tokens.
size_t max_forward_bytes(int32_t max_tokens, int32_t n_embd);
size_t max_back_bytes(int32_t max_tokens);

// Encodes a forward message into `out` (resized; capacity reused) and returns its payload size.
size_t encode_forward(const compute::MicroBatch& mb, const float* x, int32_t n_embd, WireCodec codec,
                      std::vector<uint8_t>& out);
std::vector<uint8_t> encode_shutdown();
// Decodes a forward message of `bytes` bytes; returns its kind. For MicroBatch fills mb and x (x must
// hold n_tokens x n_embd floats). Throws InternalError on a malformed message (a bug, not user input).
MessageKind decode_forward(const uint8_t* data, size_t bytes, int32_t n_embd, compute::MicroBatch& mb, float* x);

void encode_back(const compute::MicroBatchResult& r, std::vector<uint8_t>& out);
void decode_back(const uint8_t* data, size_t bytes, compute::MicroBatchResult& r);

// Activation codecs on their own (for tests and the wire-size figures).
void encode_activations(WireCodec c, const float* x, int64_t n_tokens, int64_t n_embd, uint8_t* out);
void decode_activations(WireCodec c, const uint8_t* in, int64_t n_tokens, int64_t n_embd, float* x);

}  // namespace glacier::pipeline
