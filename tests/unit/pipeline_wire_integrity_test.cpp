// Wire integrity: every sealed message passes its check and any damaged byte fails it, reports name the
// link and the micro-batch, GLACIER_TEST_CORRUPT_SEND is parsed strictly, and in a whole ring of threads
// a message damaged on any link ends the driver's run with that link's report while the ring still
// shuts down cleanly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "comm/inprocess_channel.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "compute/top_logprobs.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "pipeline/pipeline_ring.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_loop.h"
#include "pipeline/wire.h"
#include "pipeline/wire_integrity.h"
#include "planning/partition.h"
#include "util/error.h"

namespace {

using namespace glacier;
using pipeline::MessageCheck;

constexpr int32_t kEmbd = 16;

compute::MicroBatch sample_micro_batch(int64_t id) {
  compute::MicroBatch mb;
  mb.id = id;
  compute::Chunk c;
  c.seq = 3;
  c.slot = 1;
  c.n_tokens = 3;
  mb.chunks.push_back(c);
  mb.tokens = {5, 6, 7};
  mb.targets = {6, 7, 8};
  return mb;
}

std::vector<float> activations(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

std::string report_of(const std::vector<uint8_t>& msg, int from, int to, int64_t last_sound) {
  try {
    pipeline::verify_received(msg.data(), msg.size(), from, to, "activations", last_sound);
  } catch (const pipeline::WireIntegrityError& e) {
    return e.what();
  }
  return "";
}

TEST(WireIntegrity, SealedMessagesOfEveryKindPassTheirCheck) {
  const auto x = activations(3 * kEmbd);
  std::vector<uint8_t> msg;
  for (auto codec : {pipeline::WireCodec::F32, pipeline::WireCodec::F16, pipeline::WireCodec::BF16,
                     pipeline::WireCodec::Int8}) {
    pipeline::encode_forward(sample_micro_batch(17), x.data(), kEmbd, codec, msg);
    const MessageCheck c = pipeline::check_message(msg.data(), msg.size());
    EXPECT_EQ(c.status, MessageCheck::Status::Sound) << pipeline::codec_name(codec);
    EXPECT_EQ(c.mb_id, 17);
    EXPECT_EQ(report_of(msg, 1, 2, 16), "");
  }
  compute::MicroBatchResult r;
  r.id = 9;
  r.chunks.resize(2);
  r.target_logprobs = {-1.5f};
  r.target_greedy = {1};
  pipeline::encode_back(r, msg);
  EXPECT_EQ(pipeline::check_message(msg.data(), msg.size()).status, MessageCheck::Status::Sound);
  compute::MicroBatchResult back;
  EXPECT_EQ(pipeline::decode_back(msg.data(), msg.size(), back), pipeline::MessageKind::MicroBatch);
  EXPECT_EQ(back.id, 9);
  EXPECT_EQ(back.target_logprobs, r.target_logprobs);
  msg = pipeline::encode_shutdown();
  EXPECT_EQ(pipeline::check_message(msg.data(), msg.size()).status, MessageCheck::Status::Sound);
}

// A micro-batch of decode steps that all ask for the most alternatives: the back message carries them
// exactly and fits the receive buffer max_back_bytes sizes.
TEST(WireIntegrity, BackMessageCarriesTopLogprobsWithinItsBound) {
  constexpr int32_t kSteps = 6;
  compute::MicroBatchResult r;
  r.id = 4;
  for (int32_t c = 0; c < kSteps; ++c) {
    compute::ChunkResult cr;
    cr.seq = c;
    cr.token = 100 + c;
    cr.first_top = c * compute::kMaxTopLogprobs;
    cr.n_top = compute::kMaxTopLogprobs;
    r.chunks.push_back(cr);
    for (int32_t j = 0; j < compute::kMaxTopLogprobs; ++j) {
      r.top_ids.push_back(1000 * c + j);
      r.top_logprobs.push_back(-0.25f * static_cast<float>(j + c));
    }
  }
  std::vector<uint8_t> msg;
  pipeline::encode_back(r, msg);
  EXPECT_LE(msg.size(), pipeline::max_back_bytes(kSteps));
  EXPECT_EQ(pipeline::check_message(msg.data(), msg.size()).status, MessageCheck::Status::Sound);
  compute::MicroBatchResult back;
  ASSERT_EQ(pipeline::decode_back(msg.data(), msg.size(), back), pipeline::MessageKind::MicroBatch);
  EXPECT_EQ(back.top_ids, r.top_ids);
  EXPECT_EQ(back.top_logprobs, r.top_logprobs);
  ASSERT_EQ(back.chunks.size(), r.chunks.size());
  EXPECT_EQ(back.chunks[3].first_top, 3 * compute::kMaxTopLogprobs);
  EXPECT_EQ(back.chunks[3].n_top, compute::kMaxTopLogprobs);
}

TEST(WireIntegrity, EveryDamagedByteIsFoundAndPlaced) {
  const auto x = activations(3 * kEmbd);
  std::vector<uint8_t> sound;
  pipeline::encode_forward(sample_micro_batch(17), x.data(), kEmbd, pipeline::WireCodec::F16, sound);
  // The header is the first 40 bytes (wire.cpp's Header); past it, the damage is in the body and the
  // micro-batch id can be trusted.
  constexpr size_t kHeaderBytes = 40;
  for (size_t i = 0; i < sound.size(); ++i) {
    std::vector<uint8_t> msg = sound;
    msg[i] ^= 0x10;
    const MessageCheck c = pipeline::check_message(msg.data(), msg.size());
    const std::string report = report_of(msg, 4, 5, 16);
    EXPECT_NE(report.find("link rank 4 -> rank 5"), std::string::npos) << "byte " << i << ": " << report;
    if (i < kHeaderBytes) {
      EXPECT_EQ(c.status, MessageCheck::Status::HeaderDamaged) << "byte " << i;
      EXPECT_NE(report.find("micro-batch unknown (the one after micro-batch 16)"), std::string::npos) << report;
    } else {
      EXPECT_EQ(c.status, MessageCheck::Status::BodyDamaged) << "byte " << i;
      EXPECT_NE(report.find("micro-batch 17:"), std::string::npos) << report;
      EXPECT_NE(c.sent, c.found);
    }
  }
  const std::vector<uint8_t> stub(sound.begin(), sound.begin() + 12);
  EXPECT_EQ(pipeline::check_message(stub.data(), stub.size()).status, MessageCheck::Status::Short);
  EXPECT_NE(report_of(stub, 0, 1, -1).find("the first on this link"), std::string::npos);
}

TEST(WireIntegrity, FaultReportsTravelSealedAndFitTheReceiveBuffers) {
  std::vector<uint8_t> msg;
  pipeline::encode_fault(23, "damaged upstream", msg);
  EXPECT_EQ(pipeline::check_message(msg.data(), msg.size()).status, MessageCheck::Status::Sound);
  compute::MicroBatchResult r;
  EXPECT_EQ(pipeline::decode_back(msg.data(), msg.size(), r), pipeline::MessageKind::Fault);
  EXPECT_EQ(pipeline::fault_report(msg.data(), msg.size()), "damaged upstream");
  pipeline::encode_fault(-1, std::string(5000, 'x'), msg);  // cut to the room a receive buffer keeps
  EXPECT_LE(msg.size(), pipeline::max_back_bytes(1));
  EXPECT_LE(msg.size(), pipeline::max_forward_bytes(1, 1));
  EXPECT_EQ(pipeline::fault_report(msg.data(), msg.size()).size(), pipeline::kMaxFaultReportBytes);
}

TEST(WireIntegrity, CorruptSendVariableIsParsedStrictly) {
  const char* var = pipeline::kCorruptSendVariable;
  ::unsetenv(var);
  EXPECT_EQ(pipeline::corrupt_send_from_env(1, 3), 0);
  ::setenv(var, "1:30", 1);
  EXPECT_EQ(pipeline::corrupt_send_from_env(1, 3), 30);
  EXPECT_EQ(pipeline::corrupt_send_from_env(0, 3), 0);  // meant for another rank
  for (const char* bad : {"1", "1:0", "a:3", "1:3x", "3:1", "-1:2"}) {
    ::setenv(var, bad, 1);
    try {
      pipeline::corrupt_send_from_env(0, 3);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(var), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    }
  }
  ::unsetenv(var);
}

// --- the whole ring in threads over in-process channels ---

constexpr int32_t kCtx = 128;
constexpr int32_t kSlots = 4;
constexpr int kStages = 3;
constexpr int kWorldBase = 10;  // as if this were a later replica: reports must name world ranks

std::string make_model() { return glacier::testing::tiny_q8_0_model_once(3, 5, "wire_integrity"); }

// Forwards to the real ring and notes the micro-batch ids in submission order (every stage handles
// them in that order, so a stage's n-th message carries the n-th id).
class RecordingRing : public pipeline::Ring {
 public:
  explicit RecordingRing(pipeline::Ring& inner) : inner_(inner) {}
  int n_stages() const override { return inner_.n_stages(); }
  void submit(const compute::MicroBatch& mb) override {
    ids.push_back(mb.id);
    inner_.submit(mb);
  }
  bool poll(compute::MicroBatchResult& out, bool wait) override { return inner_.poll(out, wait); }
  std::vector<int64_t> ids;

 private:
  pipeline::Ring& inner_;
};

struct RingOutcome {
  std::string error;          // the driver's WireIntegrityError, "" when none
  std::vector<int64_t> ids;   // micro-batches submitted
  int finished = 0;           // sequences finished before the error
};

RingOutcome run_ring(int damaged_stage, int64_t nth_message) {
  auto file = gguf::File::open(make_model());
  const model::ModelConfig cfg = model::read_model_config(*file);
  const auto split = planning::partition_by_bytes(model::weight_bytes(*file, cfg), kStages);
  auto channels = comm::make_inprocess_channels(kStages);
  RingOutcome outcome;
  std::vector<std::thread> threads;
  for (int r = 0; r < kStages; ++r) {
    threads.emplace_back([&, r] {
      ThreadPool pool(1);
      compute::TransformerStage stage(cfg, model::load_shard(*file, cfg, split[r], r == 0, r == kStages - 1), kSlots,
                                      kCtx, 16, pool);
      pipeline::TraceLog trace;
      const pipeline::WireIntegrity integrity{kWorldBase, r == damaged_stage ? nth_message : 0};
      if (r > 0) {
        pipeline::run_stage_loop(*channels[r], stage, r, kStages, pipeline::WireCodec::F16, trace,
                                 compute::ComputeThrottle(), integrity);
        return;
      }
      pipeline::PipelineRing ring(*channels[0], stage, kStages, 2 * kStages, pipeline::WireCodec::F16, trace,
                                  compute::ComputeThrottle(), integrity);
      RecordingRing recording(ring);
      pipeline::SchedulerOptions o;
      o.n_slots = kSlots;
      o.n_ctx = kCtx;
      o.ubatch = 16;
      o.max_in_flight = 2 * kStages;
      o.decode_groups = kStages;
      pipeline::Scheduler sched(o, recording, nullptr, [&](pipeline::SequenceOutcome&&) { ++outcome.finished; });
      for (int i = 0; i < 8; ++i) {
        pipeline::SequenceRequest q;
        q.seq = i;
        q.tokens = {1, 20 + i, 30 + i, 40};
        q.max_new_tokens = 6;
        q.prompt_key = 100 + i;
        sched.add(std::move(q));
      }
      try {
        sched.run();
      } catch (const pipeline::WireIntegrityError& e) {
        outcome.error = e.what();
      }
      ring.shutdown();  // must end every stage loop even after a damaged message
      outcome.ids = recording.ids;
    });
  }
  for (auto& t : threads) t.join();
  return outcome;
}

TEST(WireIntegrityRing, SoundRingRunsToTheEnd) {
  const RingOutcome o = run_ring(-1, 0);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.finished, 8);
}

TEST(WireIntegrityRing, DamageOnEveryLinkEndsTheRunNamingLinkAndMicroBatch) {
  constexpr int64_t kNth = 9;  // past the prefill: some sequences are decoding
  // Stage s sends to s + 1, the last stage back to the driver (world ranks kWorldBase + s).
  for (int s = 0; s < kStages; ++s) {
    SCOPED_TRACE("damaged on stage " + std::to_string(s));
    const RingOutcome o = run_ring(s, kNth);
    ASSERT_GE(o.ids.size(), static_cast<size_t>(kNth));
    const int from = kWorldBase + s, to = kWorldBase + (s + 1) % kStages;
    const std::string link = "link rank " + std::to_string(from) + " -> rank " + std::to_string(to);
    const std::string mb = "micro-batch " + std::to_string(o.ids[kNth - 1]) + ":";
    EXPECT_NE(o.error.find(link), std::string::npos) << o.error;
    EXPECT_NE(o.error.find(mb), std::string::npos) << o.error;
    EXPECT_NE(o.error.find(s == kStages - 1 ? "results' checksum" : "activations' checksum"), std::string::npos)
        << o.error;
    EXPECT_LT(o.finished, 8);
  }
}

}  // namespace
