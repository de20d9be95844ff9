// The page's static files (server/web_page.h), without a network: paths, types, caching, methods.
#include "server/web_page.h"

#include <string>

#include "gtest/gtest.h"

namespace streamstats::server {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The value of a "Name: value\r\n" line of `headers`, "" when absent.
std::string Header(const std::string& headers, const std::string& name) {
  const size_t at = headers.find(name + ": ");
  if (at == std::string::npos) return "";
  const size_t start = at + name.size() + 2;
  return headers.substr(start, headers.find("\r\n", start) - start);
}

TEST(WebPage, ServesThePageAndItsFilesWithTheirTypes) {
  for (const auto& [path, type, start] :
       {std::tuple<const char*, const char*, const char*>{"/", "text/html", "<!doctype html>"},
        {"/index.html", "text/html", "<!doctype html>"},
        {"/static/page.js", "text/javascript", "// The page at /"},
        {"/static/page.css", "text/css", "body"},
        {"/static/chart.js", "text/javascript", "/*!\n * Chart.js v"}}) {
    SCOPED_TRACE(path);
    const auto r = WebPageResponse("GET", path, "");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->content_type.rfind(type, 0), 0u) << r->content_type;
    EXPECT_EQ(r->body.rfind(start, 0), 0u) << r->body.substr(0, 40);
    EXPECT_EQ(r->cache_control, "no-cache");
    EXPECT_EQ(Header(r->headers, "X-Content-Type-Options"), "nosniff");
    EXPECT_FALSE(Header(r->headers, "ETag").empty());
  }
  // The page loads Chart.js and its script from this server, never from elsewhere.
  const auto page = WebPageResponse("GET", "/", "");
  EXPECT_TRUE(Contains(page->body, "<script src=\"/static/chart.js\">"));
  EXPECT_FALSE(Contains(page->body, "http://") || Contains(page->body, "https://"));
  EXPECT_TRUE(Contains(Header(page->headers, "Content-Security-Policy"), "script-src 'self'"));
}

TEST(WebPage, AnswersAMatchingETagWith304AndNoBody) {
  const auto first = WebPageResponse("GET", "/static/chart.js", "");
  const std::string etag = Header(first->headers, "ETag");
  for (const std::string& if_none_match :
       {etag, "W/" + etag, "\"other\", " + etag, std::string("*")}) {
    const auto r = WebPageResponse("GET", "/static/chart.js", if_none_match);
    EXPECT_EQ(r->status, 304) << if_none_match;
    EXPECT_TRUE(r->body.empty());
    EXPECT_EQ(Header(r->headers, "ETag"), etag);
  }
  EXPECT_EQ(WebPageResponse("GET", "/static/chart.js", "\"other\"")->status, 200);
  // Each file its own tag.
  EXPECT_NE(Header(WebPageResponse("GET", "/static/page.js", "")->headers, "ETag"), etag);
}

TEST(WebPage, LeavesOtherPathsToTheJsonApiAndRefusesOtherMethods) {
  for (const char* path : {"/v1/sessions", "/static/", "/static/nope.js", "/index.htm", "",
                           "/static/chart.js/x", "/favicon.ico"}) {
    EXPECT_FALSE(WebPageResponse("GET", path, "").has_value()) << path;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD"}) {
    const auto r = WebPageResponse(method, "/", "");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 405) << method;
    EXPECT_EQ(r->headers, "Allow: GET\r\n");
  }
}

}  // namespace
}  // namespace streamstats::server
