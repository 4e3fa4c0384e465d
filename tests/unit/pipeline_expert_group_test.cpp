// Expert parallelism without MPI: a stage's experts split over 2 and 4 threads joined by in-process
// channels (pipeline/expert_group_channel.h) give the logits of one stage holding every expert bit for
// bit, over a prefill, the decode step after it, a longer prefill (where every model's members but
// Mixtral's split the finishing of the tokens, MoeFfn::splits_tokens; the shorter ones split for some) and
// micro-batches of every sequence that the members split by sequence (TransformerStage::plan_sequence_split),
// each sequence's next chunk on another member than its last; each member maps only its share of the
// experts; the group's all-to-all and all-gather place every part.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "comm/inprocess_channel.h"
#include "common/stage_harness.h"
#include "common/test_env.h"
#include "compute/transformer_stage.h"
#include "model/synthetic_model.h"
#include "pipeline/expert_group_channel.h"

namespace glacier {
namespace {

constexpr int32_t kSlots = 4, kCtx = 64, kUbatch = 64;

const std::vector<std::vector<int32_t>> kPrompts = {{1, 17, 42, 7, 99, 3}, {1, 5, 5, 200}, {1, 64, 128, 11, 9}};

// The decode step after kPrompts: one token a sequence, at the position after its prompt.
compute::MicroBatch decode_batch() {
  compute::MicroBatch mb;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    compute::Chunk c;
    c.seq = c.slot = static_cast<int32_t>(i);
    c.start_pos = static_cast<int32_t>(kPrompts[i].size());
    c.n_tokens = 1;
    c.token_offset = mb.n_tokens();
    mb.chunks.push_back(c);
    mb.tokens.push_back(static_cast<int32_t>(30 + 7 * i));
  }
  mb.targets.assign(mb.tokens.size(), -1);
  return mb;
}

// A 40-token prompt in the slot kPrompts leave free: a micro-batch large enough that the members split the
// finishing of its tokens (MoeFfn::splits_tokens) for every model here whose experts a token allow it.
compute::MicroBatch long_prompt_batch() {
  compute::MicroBatch mb;
  compute::Chunk c;
  c.seq = c.slot = static_cast<int32_t>(kPrompts.size());
  c.start_pos = 0;
  c.n_tokens = 40;
  c.token_offset = 0;
  mb.chunks.push_back(c);
  for (int32_t i = 0; i < c.n_tokens; ++i) mb.tokens.push_back(i == 0 ? 1 : 3 + (i * 37) % 250);
  mb.targets.assign(mb.tokens.size(), -1);
  return mb;
}

// One chunk a slot, slot s's `lengths[s]` tokens from position `starts[s]` (none for a length of 0).
compute::MicroBatch every_slot_batch(const std::vector<int32_t>& starts, const std::vector<int32_t>& lengths) {
  compute::MicroBatch mb;
  for (size_t s = 0; s < starts.size(); ++s) {
    if (lengths[s] == 0) continue;
    compute::Chunk c;
    c.seq = c.slot = static_cast<int32_t>(s);
    c.start_pos = starts[s];
    c.n_tokens = lengths[s];
    c.token_offset = mb.n_tokens();
    mb.chunks.push_back(c);
    for (int32_t i = 0; i < c.n_tokens; ++i) mb.tokens.push_back(5 + (c.start_pos * 13 + i * 29 + static_cast<int32_t>(s)) % 240);
  }
  mb.targets.assign(mb.tokens.size(), -1);
  return mb;
}

// After kPrompts, decode_batch() and long_prompt_batch(): every slot continues by a chunk (the members split
// these by sequence at 2 and 4 members, a slot going to another member in the second than in the first),
// the first followed by a decode step of three slots (too small to split: every member attends for every
// sequence, from keys and values other members computed), the second by a decode step of every slot (split
// at 2 members, a token a chunk; not at 4).
std::vector<compute::MicroBatch> every_slot_batches() {
  return {every_slot_batch({7, 5, 6, 40}, {5, 6, 4, 7}), every_slot_batch({12, 11, 10, 47}, {1, 1, 1, 0}),
          every_slot_batch({13, 12, 11, 47}, {7, 4, 6, 5}), every_slot_batch({20, 16, 17, 52}, {1, 1, 1, 1})};
}

std::vector<float> head_rows(compute::TransformerStage& stage, const std::vector<float>& x, int32_t n) {
  std::vector<int32_t> rows;
  for (int32_t r = 0; r < n; ++r) rows.push_back(r);
  std::vector<float> logits(static_cast<size_t>(n) * static_cast<size_t>(stage.config().n_vocab));
  stage.head(x.data(), rows, logits.data());
  return logits;
}

// Logits of `batches` run in turn by an expert group of `members` threads; the leader embeds and evaluates
// the head. Each member's held and total expert bytes go to held[j] and all[j], the micro-batches its stage
// split by sequence to splits[j].
std::vector<std::vector<float>> group_logits(const std::string& path, int members,
                                             const std::vector<compute::MicroBatch>& batches,
                                             std::vector<uint64_t>& held, std::vector<uint64_t>& all,
                                             std::vector<int64_t>& splits) {
  auto file = gguf::File::open(path);
  const model::ModelConfig cfg = model::read_model_config(*file);
  auto channels = comm::make_inprocess_channels(members);
  std::vector<std::vector<float>> out;
  held.assign(static_cast<size_t>(members), 0);
  all.assign(static_cast<size_t>(members), 0);
  splits.assign(static_cast<size_t>(members), -1);
  std::vector<int64_t> followed(static_cast<size_t>(members), -1);
  std::vector<std::thread> threads;
  for (int j = 0; j < members; ++j) {
    threads.emplace_back([&, j] {
      ThreadPool pool(1);
      model::ShardWeights w = model::load_shard(*file, cfg, {0, cfg.n_layer}, j == 0, j == 0, nullptr, {},
                                                model::ExpertShare{j, members});
      held[static_cast<size_t>(j)] = w.expert_bytes;
      all[static_cast<size_t>(j)] = w.all_expert_bytes;
      for (const model::LayerWeights& L : w.layer)
        for (size_t e = 0; e < L.gate_exps.size(); ++e) {
          const bool mine = static_cast<int>(e) % members == j;
          EXPECT_EQ(mine, L.gate_exps[e].data != nullptr) << "member " << j << " expert " << e;
          EXPECT_EQ(mine, L.down_exps[e].data != nullptr) << "member " << j << " expert " << e;
        }
      compute::TransformerStage stage(cfg, std::move(w), kSlots, kCtx, kUbatch, pool);
      pipeline::ChannelExpertGroup group(*channels[static_cast<size_t>(j)], kUbatch, cfg.n_embd);
      stage.set_expert_group(&group);
      if (j != 0) {
        pipeline::TraceLog trace;
        followed[static_cast<size_t>(j)] = group.follow_leader(stage, &trace);
        splits[static_cast<size_t>(j)] = stage.split_micro_batches();
        // A member's trace: each shared micro-batch's wait for the leader, then its compute interval.
        const auto& events = trace.events();
        EXPECT_EQ(events.size(), 2 * batches.size()) << "member " << j;
        for (size_t b = 0; b < batches.size() && 2 * b + 1 < events.size(); ++b) {
          const pipeline::TraceEvent& wait = events[2 * b];
          const pipeline::TraceEvent& compute = events[2 * b + 1];
          EXPECT_EQ(wait.phase, pipeline::Phase::Wait);
          EXPECT_EQ(compute.phase, pipeline::Phase::Compute);
          EXPECT_EQ(compute.microbatch, batches[b].id);
          EXPECT_EQ(compute.tokens, batches[b].n_tokens());
          EXPECT_LE(wait.start, wait.end);
          EXPECT_EQ(wait.end, compute.start);
          EXPECT_LE(compute.start, compute.end);
        }
        return;
      }
      for (const compute::MicroBatch& mb : batches) {
        std::vector<float> x(static_cast<size_t>(mb.n_tokens()) * static_cast<size_t>(cfg.n_embd));
        stage.embed(mb, x.data());
        stage.run_layers(mb, x.data());
        out.push_back(head_rows(stage, x, mb.n_tokens()));
      }
      group.release_members();
      splits[0] = stage.split_micro_batches();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int j = 1; j < members; ++j)
    EXPECT_EQ(followed[static_cast<size_t>(j)], static_cast<int64_t>(batches.size())) << "member " << j;
  return out;
}

void expect_group_equals_one_stage(const std::string& path, int members) {
  std::vector<compute::MicroBatch> batches = {testing::prompts_batch(kPrompts), decode_batch(), long_prompt_batch()};
  for (compute::MicroBatch& mb : every_slot_batches()) batches.push_back(std::move(mb));
  testing::StageHarness one(path, {}, kUbatch, kSlots, kCtx);
  std::vector<std::vector<float>> expected;
  for (const compute::MicroBatch& mb : batches) expected.push_back(one.logits(mb));
  std::vector<uint64_t> held, all;
  std::vector<int64_t> splits;
  const std::vector<std::vector<float>> got = group_logits(path, members, batches, held, all, splits);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].size(), expected[b].size());
    EXPECT_EQ(0, std::memcmp(got[b].data(), expected[b].data(), got[b].size() * sizeof(float)))
        << path << ", " << members << " members: micro-batch " << b << "'s logits differ";
  }
  // Split by sequence: the two continuations, and at 2 members kPrompts' prefill too (3 sequences of 6, 4
  // and 5 tokens: 6 and 9 a member) and the last decode step (2 tokens a member); the rest has too few
  // sequences or tokens (kMinTokensAMemberToSplitLayers).
  for (int j = 0; j < members; ++j)
    EXPECT_EQ(splits[static_cast<size_t>(j)], members == 2 ? 4 : 2) << path << ", member " << j << " of " << members;
  // The experts are split evenly: each member holds exactly its share of every expert tensor.
  uint64_t sum = 0;
  for (int j = 0; j < members; ++j) {
    EXPECT_GT(all[static_cast<size_t>(j)], 0u);
    EXPECT_EQ(held[static_cast<size_t>(j)] * static_cast<uint64_t>(members), all[static_cast<size_t>(j)]) << "member " << j;
    sum += held[static_cast<size_t>(j)];
  }
  EXPECT_EQ(sum, all[0]);
  // The memory check's figure for a member (what the loader above held) from the file's table alone.
  auto file = gguf::File::open(path);
  const model::WeightBytes whole = model::weight_bytes(*file, model::read_model_config(*file));
  const model::WeightBytes member = model::expert_member_bytes(whole, members);
  uint64_t whole_layers = 0, whole_experts = 0, member_layers = 0, member_experts = 0;
  for (size_t l = 0; l < whole.per_layer.size(); ++l) {
    whole_layers += whole.per_layer[l];
    whole_experts += whole.per_layer_experts[l];
    member_layers += member.per_layer[l];
    member_experts += member.per_layer_experts[l];
  }
  EXPECT_EQ(whole_experts, all[0]);
  EXPECT_EQ(member_experts, held[0]);
  EXPECT_EQ(member_layers, whole_layers - all[0] + held[0]);
}

// DeepSeek V3-shaped (a dense first layer, sigmoid gating with a selection bias, a shared expert), written here.
std::string deepseek_model(const std::string& type) {
  model::SyntheticModelSpec s;
  s.arch = "deepseek2";
  s.n_layer = 3;
  s.n_head_kv = s.n_head;
  s.deepseek.n_expert = 8;
  s.deepseek.n_expert_used = 3;
  s.deepseek.sigmoid_gating = true;
  s.deepseek.exp_probs_b = true;
  s.deepseek.weights_norm = true;
  model::set_synthetic_type(s, type);
  const std::string path = testing::scratch_dir("expert-group-" + type) + "/v3.gguf";
  model::write_synthetic_model(s, path);
  return path;
}

TEST(ExpertGroup, DeepSeekExpertsSplitOverTwoAndFourGiveOneStagesLogitsBitForBit) {
  for (const char* type : {"f32", "bf16"}) {
    const std::string path = deepseek_model(type);
    expect_group_equals_one_stage(path, 2);
    expect_group_equals_one_stage(path, 4);
  }
}

TEST(ExpertGroup, SharedMixtralAndQwen2MoeSplitGiveOneStagesLogitsBitForBit) {
  GLACIER_REQUIRE_SHARED(mixtral, "models/synthetic/synth-mixtral-q8_0.gguf");
  GLACIER_REQUIRE_SHARED(qwen2moe, "models/synthetic/synth-qwen2moe-f32.gguf");
  expect_group_equals_one_stage(mixtral, 2);
  expect_group_equals_one_stage(mixtral, 4);
  expect_group_equals_one_stage(qwen2moe, 2);
  expect_group_equals_one_stage(qwen2moe, 4);
}

// The group's two collectives over in-process channels, three members with uneven parts (some empty):
// all_to_all delivers part j of member i's send buffer to member j at i's place in member order, and
// all_gather delivers each member's values to the others' spans and leaves a member's own span alone.
TEST(ExpertGroup, AllToAllAndAllGatherPlaceEveryPartInMemberOrder) {
  constexpr int kMembers = 3;
  constexpr int kUntouched = -1;
  // Member i sends member j (j != i) `count(i, j)` floats of value 100 i + j.
  auto count = [](int i, int j) { return i == j ? size_t{0} : static_cast<size_t>((i + 2 * j) % 4); };
  auto rows = [](int j) { return static_cast<size_t>(j * 2); };  // member j's all_gather values: 0, 2, 4
  auto channels = comm::make_inprocess_channels(kMembers);
  std::vector<std::thread> threads;
  for (int me = 0; me < kMembers; ++me)
    threads.emplace_back([&, me] {
      pipeline::ChannelExpertGroup group(*channels[static_cast<size_t>(me)], 4, 8);
      std::vector<size_t> to(kMembers), from(kMembers);
      std::vector<float> send;
      for (int j = 0; j < kMembers; ++j) {
        to[size_t(j)] = count(me, j);
        from[size_t(j)] = count(j, me);
        send.insert(send.end(), to[size_t(j)], float(100 * me + j));
      }
      std::vector<float> recv(from[0] + from[1] + from[2] + 1, kUntouched);
      group.all_to_all(send.data(), to, recv.data(), from);
      size_t at = 0;
      for (int i = 0; i < kMembers; ++i)
        for (size_t c = 0; c < from[size_t(i)]; ++c, ++at)
          EXPECT_EQ(recv[at], float(100 * i + me)) << "member " << me << " from " << i;
      EXPECT_EQ(recv[at], kUntouched) << "member " << me << ": written past the parts";

      std::vector<size_t> counts = {rows(0), rows(1), rows(2)};
      std::vector<float> all(rows(0) + rows(1) + rows(2), kUntouched);
      const size_t mine_at = me == 0 ? 0 : me == 1 ? rows(0) : rows(0) + rows(1);
      std::vector<float> mine(rows(me), float(1000 + me));
      group.all_gather(mine.data(), counts, all.data());
      size_t pos = 0;
      for (int j = 0; j < kMembers; ++j)
        for (size_t c = 0; c < rows(j); ++c, ++pos)
          EXPECT_EQ(all[pos], pos >= mine_at && pos < mine_at + rows(me) ? float(kUntouched) : float(1000 + j))
              << "member " << me << " position " << pos;
    });
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace glacier
