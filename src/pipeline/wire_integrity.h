// What a rank does with the checksums of the messages it receives: a damaged message ends the job with a
// report naming the link (sending and receiving world rank) and the micro-batch; and the testing aid that
// damages one outgoing message on purpose (GLACIER_TEST_CORRUPT_SEND).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace glacier::pipeline {

// A message failed its checksum on some link of the ring. Rank 0 (the driver) throws it from
// PipelineRing::poll when the damage is found there or reported by a later stage; results computed
// from sound messages before it stand, so the driver saves them and ends the job (exit code 1).
class WireIntegrityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where this pipeline's ranks sit in the job, and the testing aid.
struct WireIntegrity {
  int world_rank_base = 0;  // the world rank of stage 0 (replica k's stages are k x P .. k x P + P - 1)
  // Damage this rank's n-th micro-batch message (1-based: activations or results) after sealing it; 0 = never.
  int64_t corrupt_send = 0;
};

// The environment variable of the testing aid: "R:N" damages world rank R's N-th micro-batch message.
constexpr const char* kCorruptSendVariable = "GLACIER_TEST_CORRUPT_SEND";
// What GLACIER_TEST_CORRUPT_SEND asks of this rank (0 when unset or meant for another rank). Throws
// InputError naming the variable, the expected form and the value found when it is malformed or names
// a rank outside the job.
int64_t corrupt_send_from_env(int world_rank, int world_size);

// Throws WireIntegrityError when a message received on link from -> to fails its checksums. `what`
// names the contents ("activations", "results"); `last_sound_mb` (-1: none yet) places a message whose
// header is damaged, when its own micro-batch id cannot be trusted.
void verify_received(const uint8_t* data, size_t bytes, int from, int to, const char* what, int64_t last_sound_mb);

// Counts a rank's outgoing micro-batch messages and damages the one WireIntegrity::corrupt_send names.
class SendDamager {
 public:
  explicit SendDamager(int64_t corrupt_send) : target_(corrupt_send) {}
  // Call once per sealed micro-batch message, just before sending it.
  void before_send(std::vector<uint8_t>& msg, int from, int to, int64_t mb_id);

 private:
  int64_t target_;
  int64_t sent_ = 0;
};

}  // namespace glacier::pipeline
