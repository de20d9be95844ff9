// Forwarding between cluster nodes (issue 17 item 3): which refusals a node forwards, and how
// far, without a network.
#include "server/forwarder.h"

#include "absl/strings/cord.h"
#include "gtest/gtest.h"
#include "server/cluster_ownership.h"

namespace streamstats::server {
namespace {

TEST(Forwarder, ForwardsARefusalNamingTheOwnerUntilTheHopLimitOrARedirect) {
  Forwarder forwarder({});
  const absl::Status refusal = NotTheOwnerError("t", "s", "node2", "10.0.0.2:50051");
  Forwarder::Origin client;
  std::string address;
  ASSERT_TRUE(forwarder.ShouldForward(client, refusal, false, &address));
  EXPECT_EQ(address, "10.0.0.2:50051");

  Forwarder::Origin hopped;
  hopped.hops = kMaxHops - 1;
  EXPECT_FALSE(forwarder.ShouldForward(hopped, refusal, true, &address))
      << "a call that made its hops is answered with the refusal: no loop";

  Forwarder::Origin redirect;
  redirect.redirect = true;
  EXPECT_FALSE(forwarder.ShouldForward(redirect, refusal, false, &address));
  EXPECT_TRUE(forwarder.ShouldForward(redirect, refusal, true, &address))
      << "a split session's part is reached whatever the client asked";

  EXPECT_FALSE(forwarder.ShouldForward(client, absl::NotFoundError("no session"), false, &address));
  absl::Status unavailable = absl::UnavailableError("members unknown");
  unavailable.SetPayload(kOwnerPayload, absl::Cord("10.0.0.2:50051"));
  EXPECT_FALSE(forwarder.ShouldForward(client, unavailable, false, &address))
      << "only FAILED_PRECONDITION names an owner to go to";

  Forwarder::Options options;
  options.forward_clients = false;
  Forwarder refusing(options);
  EXPECT_FALSE(refusing.ShouldForward(client, refusal, false, &address));
  EXPECT_TRUE(refusing.ShouldForward(client, refusal, true, &address));
}

}  // namespace
}  // namespace streamstats::server
