// The ring trip: rank 0 starts each round and times it; the others pass the message on.
#include "comm/ring_timing.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "comm/message_tags.h"
#include "util/clock.h"

namespace glacier::comm {

double ring_hop_seconds(Channel& ch, size_t bytes, int rounds) {
  if (rounds < 1) throw std::invalid_argument("ring timing: expected at least one round");
  const int n = ch.size();
  if (n < 2) return 0.0;
  const int me = ch.rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<unsigned char> out(std::max<size_t>(bytes, 1)), in(out.size());  // a send and a receive never share a buffer
  std::vector<double> trips;
  for (int i = 0; i < rounds; ++i) {
    if (me == 0) {
      const double t0 = now_seconds();
      Request rx = ch.irecv(in.data(), in.size(), prev, tags::kRingHop);
      Request tx = ch.isend(out.data(), out.size(), next, tags::kRingHop);
      ch.wait(tx);
      ch.wait(rx);
      trips.push_back(now_seconds() - t0);
    } else {
      Request rx = ch.irecv(in.data(), in.size(), prev, tags::kRingHop);
      ch.wait(rx);
      Request tx = ch.isend(out.data(), out.size(), next, tags::kRingHop);
      ch.wait(tx);
    }
  }
  // Rank 0's fastest, to every rank (in nanoseconds: the channel gathers integers).
  int64_t hop_ns = 0;
  if (me == 0) hop_ns = static_cast<int64_t>(*std::min_element(trips.begin(), trips.end()) / n * 1e9);
  return static_cast<double>(ch.allgather(hop_ns)[0]) * 1e-9;
}

}  // namespace glacier::comm
