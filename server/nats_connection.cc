#include "server/nats_connection.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace streamstats::server {

std::string NatsStatusText(natsStatus s, jsErrCode jerr) {
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  std::string out = natsStatus_GetText(s);
  if (text != nullptr && *text != '\0' && last == s) out = absl::StrCat(out, ": ", text);
  if (jerr != 0) absl::StrAppend(&out, " (JetStream error ", static_cast<int>(jerr), ")");
  return out;
}

absl::Status ConnectJetStream(const std::vector<std::string>& servers, int64_t wait_ms,
                              natsConnection** nc, jsCtx** js) {
  natsOptions* opts = nullptr;
  if (natsOptions_Create(&opts) != NATS_OK) return absl::InternalError("natsOptions_Create failed");
  absl::Cleanup destroy = [opts] { natsOptions_Destroy(opts); };
  std::vector<const char*> urls;
  for (const std::string& s : servers) urls.push_back(s.c_str());
  natsStatus s = natsOptions_SetServers(opts, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);  // forever: the cluster comes back
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 200);
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 2000);
  // Opening may come before the NATS servers: the connection keeps trying in the background.
  if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(opts, true, nullptr, nullptr);
  if (s != NATS_OK) return absl::InvalidArgumentError(absl::StrCat("--cluster: ", NatsStatusText(s)));
  s = natsConnection_Connect(nc, opts);
  if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
    return absl::UnavailableError(absl::StrCat("cannot connect to --cluster: ", NatsStatusText(s)));
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = wait_ms;
  s = natsConnection_JetStream(js, *nc, &jo);
  if (s != NATS_OK) return absl::InternalError(absl::StrCat("JetStream context: ", NatsStatusText(s)));
  return absl::OkStatus();
}

}  // namespace streamstats::server
