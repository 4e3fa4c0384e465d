// Every point-to-point message tag of the job, in one place, so two kinds of message never share one by
// accident. Messages on different channels (the world, a replica's pipeline, the watchdog's own
// communicator) cannot meet, but each tag here is still distinct.
#pragma once

namespace glacier::comm::tags {

// Watchdog (its own communicator, mpi_channel.cpp).
constexpr int kPing = 1;
constexpr int kPong = 2;
// The pipeline's activations (a replica's channel, pipeline/wire.h).
constexpr int kForward = 11;
constexpr int kBack = 12;
// An expert group's own channel (--expert-parallel, pipeline/expert_group_channel.h): the leader's
// micro-batches to the other members, the expert outputs each member sends the members that finish
// their tokens, and the finished rows every member sends the others.
constexpr int kExpertInput = 21;
constexpr int kExpertOutputs = 22;
constexpr int kExpertRows = 23;
// The replicas' work queue (the world channel, app/work_queue.cpp).
constexpr int kWantWork = 31;
constexpr int kWork = 32;
constexpr int kResult = 33;
// Clock alignment, before any other point-to-point traffic (clock_sync.h).
constexpr int kClockSync = 41;
// The ring's hop timing for --decode-groups auto, after the clocks and before the pipeline starts (ring_timing.h).
constexpr int kRingHop = 42;
// Each rank's trace rows to rank 0, which writes the results file's /trace (app/trace_output.cpp).
constexpr int kTraceRows = 51;
// Stop notices and the start-up watchdog (stop_relay.cpp, startup_watchdog.cpp).
constexpr int kStopNotice = 901;
constexpr int kStartupReport = 902;   // rank -> 0: phase and progress
constexpr int kStartupBeat = 903;     // 0 -> rank: rank 0's phase
constexpr int kStartupVerdict = 904;  // 0 -> rank: the stall that ends the job

}  // namespace glacier::comm::tags
