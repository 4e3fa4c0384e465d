// Cristian's clock alignment over a Channel: rank 0 answers each rank's pings with its clock reading.
#include "comm/clock_sync.h"

#include <cmath>
#include <stdexcept>

namespace glacier::comm {

ClockOffset offset_to_root(Channel& ch, const std::function<double()>& clock, int rounds) {
  if (rounds < 1) throw std::invalid_argument("clock alignment: expected at least one round");
  ClockOffset best;
  if (ch.rank() == 0) {
    // Ranks in order, so each round trip is timed without another rank's pings queued before it.
    for (int r = 1; r < ch.size(); ++r) {
      for (int i = 0; i < rounds; ++i) {
        double ping = 0.0;
        Request rx = ch.irecv(&ping, sizeof(double), r, kTagClockSync);
        ch.wait(rx);
        const double reading = clock();
        Request tx = ch.isend(&reading, sizeof(double), r, kTagClockSync);
        ch.wait(tx);
      }
    }
    return best;
  }
  best.error_s = INFINITY;
  for (int i = 0; i < rounds; ++i) {
    const double sent = clock();
    double reading = 0.0;
    Request rx = ch.irecv(&reading, sizeof(double), 0, kTagClockSync);
    Request tx = ch.isend(&sent, sizeof(double), 0, kTagClockSync);
    ch.wait(tx);
    ch.wait(rx);
    const double back = clock();
    const double half_trip = 0.5 * (back - sent);
    if (half_trip < best.error_s) best = {reading - 0.5 * (sent + back), half_trip};
  }
  return best;
}

}  // namespace glacier::comm
