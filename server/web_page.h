// The page at / (issue 16 item 6): the caller's sessions with their quantile curve (CDF and its
// error band), p50/p90/p99 over time, heavy hitters, N and memory, drawn in the browser with
// Chart.js from the JSON API under /v1 (server/http_api.h) — the page's script asks the same
// endpoints a curl user does, with the token the user gives it (README: The page).
//
// The files (server/web/ and Debian's libjs-chart.js) are embedded in the binary at build time
// (server/web/embed.cmake): nothing is read from disk or fetched from a CDN at run time. They hold
// no data, so they need no token.
#ifndef STREAMSTATS_SERVER_WEB_PAGE_H_
#define STREAMSTATS_SERVER_WEB_PAGE_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "server/http_api.h"

namespace streamstats::server {

// The answer to `method` on `path` when `path` is one of the page's files: "/" and
// "/index.html" (the page), "/static/page.js", "/static/page.css", "/static/chart.js"; nullopt
// for any other path (the JSON API's). GET only (else 405). Each file carries its Content-Type,
// "Cache-Control: no-cache" and an ETag (a hash of its bytes), so a browser revalidates and gets
// 304 Not Modified without a body while the binary is the same (`if_none_match`: the request's
// If-None-Match, "" when absent). The page also carries a Content-Security-Policy that allows
// scripts, styles and requests from this origin only.
std::optional<HttpResponse> WebPageResponse(absl::string_view method, absl::string_view path,
                                            absl::string_view if_none_match);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_WEB_PAGE_H_
