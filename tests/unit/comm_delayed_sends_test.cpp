// The injected-delay send queue: sends leave in the order they were held, none before it is due, and a
// dropped (cancelled) send never leaves.
#include <gtest/gtest.h>

#include <vector>

#include "comm/delayed_sends.h"

namespace {

using glacier::comm::DelayedSends;
using glacier::comm::HeldSend;

std::vector<int64_t> release(DelayedSends& q, double now) {
  std::vector<int64_t> ids;
  q.release_due(now, [&](const HeldSend& s) { ids.push_back(s.id); });
  return ids;
}

TEST(DelayedSends, ReleasesDueSendsInOrderAndNoneEarly) {
  DelayedSends q;
  const char payload[3] = {1, 2, 3};
  q.hold({4, payload, sizeof payload, 1, 7, 10.0});
  q.hold({2, payload, 1, 1, 7, 10.5});
  q.hold({9, payload, 2, 2, 8, 11.0});
  EXPECT_TRUE(q.holds(4) && q.holds(2) && q.holds(9));
  EXPECT_FALSE(q.holds(3));
  EXPECT_TRUE(release(q, 9.99).empty());
  EXPECT_EQ(release(q, 10.6), (std::vector<int64_t>{4, 2}));
  EXPECT_FALSE(q.holds(4));
  EXPECT_FALSE(q.holds(2));
  EXPECT_TRUE(q.holds(9));
  std::vector<HeldSend> last;
  q.release_due(20.0, [&](const HeldSend& s) { last.push_back(s); });
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].buf, payload);
  EXPECT_EQ(last[0].bytes, 2u);
  EXPECT_EQ(last[0].dest, 2);
  EXPECT_EQ(last[0].tag, 8);
  EXPECT_TRUE(q.empty());
}

TEST(DelayedSends, DroppedSendNeverLeavesAndItsIdIsFreeAgain) {
  DelayedSends q;
  q.hold({0, nullptr, 0, 1, 1, 1.0});
  q.hold({1, nullptr, 0, 1, 1, 1.0});
  EXPECT_TRUE(q.drop(0));
  EXPECT_FALSE(q.drop(0));
  EXPECT_FALSE(q.holds(0));
  EXPECT_EQ(release(q, 2.0), (std::vector<int64_t>{1}));
  q.hold({0, nullptr, 0, 1, 1, 3.0});  // a request id is reused once released
  EXPECT_TRUE(q.holds(0));
  EXPECT_EQ(release(q, 3.0), (std::vector<int64_t>{0}));
  EXPECT_FALSE(q.drop(5));  // never held, and past the ids seen
}

}  // namespace
