// Reports of damaged messages and the testing aid that damages one. A report says what was damaged,
// between which ranks and in which micro-batch, and that the job stops rather than return results that
// would look plausible but be wrong.
#include "pipeline/wire_integrity.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "pipeline/wire.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::pipeline {

int64_t corrupt_send_from_env(int world_rank, int world_size) {
  const char* value = std::getenv(kCorruptSendVariable);
  if (value == nullptr || *value == '\0') return 0;
  long long rank = -1, nth = 0;
  int used = 0;
  const bool parsed = std::sscanf(value, "%lld:%lld%n", &rank, &nth, &used) == 2 && value[used] == '\0';
  if (!parsed || nth < 1)
    throw InputError(std::string(kCorruptSendVariable) + ": expected RANK:N (damage world rank RANK's N-th " +
                     "micro-batch message, N >= 1), found '" + value + "'");
  if (rank < 0 || rank >= world_size)
    throw InputError(std::string(kCorruptSendVariable) + "=" + value + ": rank " + std::to_string(rank) +
                     " is outside this job's " + std::to_string(world_size) + " ranks");
  return rank == world_rank ? static_cast<int64_t>(nth) : 0;
}

namespace {

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

void verify_received(const uint8_t* data, size_t bytes, int from, int to, const char* what, int64_t last_sound_mb) {
  const MessageCheck c = check_message(data, bytes);
  if (c.status == MessageCheck::Status::Sound) return;
  const std::string link = "link rank " + std::to_string(from) + " -> rank " + std::to_string(to);
  const std::string after = last_sound_mb < 0 ? "the first on this link"
                                              : "the one after micro-batch " + std::to_string(last_sound_mb);
  std::string found;
  switch (c.status) {
    case MessageCheck::Status::Short:
      found = "micro-batch unknown (" + after + "): a message of " + std::to_string(bytes) +
              " bytes, shorter than its header";
      break;
    case MessageCheck::Status::HeaderDamaged:
      found = "micro-batch unknown (" + after + "): the " + std::to_string(bytes) + "-byte message's header " +
              "checksum is " + hex(c.found) + ", sealed as " + hex(c.sent);
      break;
    case MessageCheck::Status::BodyDamaged:
      found = "micro-batch " + std::to_string(c.mb_id) + ": the " + std::string(what) + "' checksum (CRC32C of the " +
              std::to_string(c.body_bytes) + " bytes after the header) is " + hex(c.found) + ", sealed as " + hex(c.sent);
      break;
    case MessageCheck::Status::Sound:
      break;
  }
  throw WireIntegrityError("wire integrity: damaged message on the " + link + ", " + found +
                           ": a faulty network link, NIC or memory changed it in transit; the job stops rather than "
                           "compute on it (results before it are kept; rerun with --resume)");
}

void SendDamager::before_send(std::vector<uint8_t>& msg, int from, int to, int64_t mb_id) {
  if (target_ <= 0 || ++sent_ != target_) return;
  damage_message(msg);
  GLACIER_LOG_WARN("%s: damaged micro-batch %lld's message on the link rank %d -> rank %d after sealing it (testing aid)",
                   kCorruptSendVariable, static_cast<long long>(mb_id), from, to);
}

}  // namespace glacier::pipeline
