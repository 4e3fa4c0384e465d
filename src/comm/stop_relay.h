// Carries a stop signal that a rank other than 0 received to world rank 0, which drains the job: a
// batch system or a user may signal any one rank, and only rank 0 drives the prompts.
#pragma once

namespace glacier::comm {

// Called from every MpiChannel wait and progress step and from the start-up watchdog. A rank that got a
// stop signal sends one notice to world rank 0; rank 0 takes the notices (at most every
// kStopPollIntervalS) into util/stop_request, where its drivers look.
void relay_stop_requests();

}  // namespace glacier::comm
