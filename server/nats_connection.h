// The NATS connection that cluster mode's two clients open, the replicated log
// (server/jetstream_log.h) and the ownership buckets (server/nats_ownership.h), and the text of
// nats.c's errors. Built only with nats.c (server/CMakeLists.txt).
#ifndef STREAMSTATS_SERVER_NATS_CONNECTION_H_
#define STREAMSTATS_SERVER_NATS_CONNECTION_H_

#include <nats/nats.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace streamstats::server {

// natsStatus_GetText(s), with the text nats.c keeps of this thread's last error when that error
// is `s` (it says more than the status name), and the JetStream error code when there is one.
std::string NatsStatusText(natsStatus s, jsErrCode jerr = static_cast<jsErrCode>(0));

// Connects to every URL of `servers` (a cluster: any one will do), reconnecting forever with
// 200 ms between tries and a 2 s connect timeout, and returning while the servers are not up yet
// (the connection keeps trying in the background); then the JetStream context, whose calls wait
// `wait_ms` for an answer. On success *nc and *js are the caller's to destroy.
// InvalidArgument for unusable URLs, Unavailable when no connection can be attempted.
absl::Status ConnectJetStream(const std::vector<std::string>& servers, int64_t wait_ms,
                              natsConnection** nc, jsCtx** js);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_NATS_CONNECTION_H_
