// EngineHarness: wires the same pieces glacier_mpi uses on one rank, without MPI or files out.
#include "common/engine_harness.h"

#include <algorithm>

#include "pipeline/local_ring.h"

namespace glacier::testing {

EngineHarness::EngineHarness(const std::string& model_path, int32_t ctx, int32_t slots, int32_t ubatch,
                             int threads)
    : n_slots(slots) {
  open(model_path, threads);
  load(ctx, slots, ubatch);
}

std::vector<float> EngineHarness::all_logits(const std::vector<int32_t>& tokens) {
  compute::MicroBatch mb;
  compute::Chunk c;
  c.n_tokens = static_cast<int32_t>(tokens.size());
  mb.chunks.push_back(c);
  mb.tokens = tokens;
  mb.targets.assign(tokens.size(), -1);
  std::vector<float> x(tokens.size() * static_cast<size_t>(cfg.n_embd));
  stage->embed(mb, x.data());
  stage->run_layers(mb, x.data());
  std::vector<float> logits(tokens.size() * static_cast<size_t>(cfg.n_vocab));
  // The head takes rows in groups no larger than the stage's buffers.
  const size_t group = 16;
  std::vector<float> part(group * static_cast<size_t>(cfg.n_vocab));
  for (size_t r0 = 0; r0 < tokens.size(); r0 += group) {
    std::vector<int32_t> rows;
    for (size_t r = r0; r < std::min(tokens.size(), r0 + group); ++r) rows.push_back(static_cast<int32_t>(r));
    stage->head(x.data(), rows, part.data());
    std::copy(part.begin(), part.begin() + rows.size() * cfg.n_vocab, logits.begin() + r0 * cfg.n_vocab);
  }
  return logits;
}

std::vector<pipeline::SequenceOutcome> EngineHarness::run(std::vector<pipeline::SequenceRequest> requests,
                                                          int32_t ubatch, int32_t max_in_flight, int32_t draft_max,
                                                          pipeline::SpeculationCounts* counts) {
  pipeline::LocalRing ring(*stage, max_in_flight);
  pipeline::SchedulerOptions opt;
  opt.n_slots = n_slots;
  opt.n_ctx = n_ctx;
  opt.ubatch = ubatch > 0 ? ubatch : stage->max_tokens();
  opt.max_in_flight = max_in_flight;
  opt.draft_max = draft_max;
  std::vector<pipeline::SequenceOutcome> out(requests.size());
  pipeline::Scheduler sched(opt, ring, [&](const pipeline::SequenceOutcome& o) {
    return tok->is_end_of_generation(o.generated.back());
  }, [&](pipeline::SequenceOutcome&& o) { out[static_cast<size_t>(o.seq)] = std::move(o); });
  for (auto& r : requests) sched.add(std::move(r));
  sched.run();
  if (counts) *counts = sched.speculation();
  return out;
}

std::vector<std::vector<int32_t>> EngineHarness::greedy(const std::vector<std::string>& prompts, int32_t n_tokens) {
  std::vector<pipeline::SequenceRequest> reqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    pipeline::SequenceRequest r;
    r.seq = static_cast<int32_t>(i);
    r.tokens = tok->encode(prompts[i], true, false);
    r.max_new_tokens = n_tokens;
    reqs.push_back(std::move(r));
  }
  std::vector<std::vector<int32_t>> gen;
  for (auto& o : run(std::move(reqs))) gen.push_back(o.generated);
  return gen;
}

}  // namespace glacier::testing
