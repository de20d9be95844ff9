// Tests for core/frequencies/prefix_hierarchy.h: keys read as IPv4, IPv6 and paths, malformed
// ones refused, prefix texts written and read back.
#include "core/frequencies/prefix_hierarchy.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

std::string Hex(absl::string_view bytes) { return absl::BytesToHexString(bytes); }

TEST(PrefixHierarchy, ReadsDottedIpv4) {
  uint32_t a = 0;
  ASSERT_TRUE(ParseIpv4("10.1.2.3", &a));
  EXPECT_EQ(a, 0x0A010203u);
  ASSERT_TRUE(ParseIpv4("0.0.0.0", &a));
  EXPECT_EQ(a, 0u);
  ASSERT_TRUE(ParseIpv4("255.255.255.255", &a));
  EXPECT_EQ(a, 0xFFFFFFFFu);
}

TEST(PrefixHierarchy, RefusesMalformedIpv4) {
  uint32_t a = 0;
  for (const char* bad : {"", "10.1.2", "10.1.2.3.4", "256.1.1.1", "10.01.2.3", "10..2.3",
                          "10.1.2.3 ", "-1.2.3.4", "1.2.3.x", "10.1.2.3/24", "0x0A.1.2.3",
                          "1000.1.1.1"}) {
    EXPECT_FALSE(ParseIpv4(bad, &a)) << bad;
  }
}

TEST(PrefixHierarchy, ReadsIpv6TextInEveryForm) {
  std::string b;
  ASSERT_TRUE(ParseIpv6("2001:db8::1", &b));
  EXPECT_EQ(Hex(b), "20010db8000000000000000000000001");
  ASSERT_TRUE(ParseIpv6("::", &b));
  EXPECT_EQ(Hex(b), std::string(32, '0'));
  ASSERT_TRUE(ParseIpv6("::1", &b));
  EXPECT_EQ(Hex(b), "00000000000000000000000000000001");
  ASSERT_TRUE(ParseIpv6("fe80::", &b));
  EXPECT_EQ(Hex(b), "fe800000000000000000000000000000");
  ASSERT_TRUE(ParseIpv6("1:2:3:4:5:6:7:8", &b));
  EXPECT_EQ(Hex(b), "00010002000300040005000600070008");
  ASSERT_TRUE(ParseIpv6("::ffff:10.1.2.3", &b));
  EXPECT_EQ(Hex(b), "00000000000000000000ffff0a010203");
  ASSERT_TRUE(ParseIpv6("1:2:3:4:5:6:10.1.2.3", &b));
  EXPECT_EQ(Hex(b), "0001000200030004000500060a010203");
  ASSERT_TRUE(ParseIpv6("2001:DB8:0:0:0:0:0:FFFF", &b));
  EXPECT_EQ(Hex(b), "20010db800000000000000000000ffff");
  ASSERT_TRUE(ParseIpv6("1::2:3:4:5:6:7", &b));  // "::" standing for a single group
  EXPECT_EQ(Hex(b), "00010000000200030004000500060007");
}

TEST(PrefixHierarchy, RefusesMalformedIpv6) {
  std::string b;
  for (const char* bad :
       {"", ":", ":::", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "g::1",
        ":1::", "1::2:", "1:2:3:4:5:6:7::8", "::1.2.3", "1.2.3.4::", "fe80::1%eth0",
        "1:2:3:4:5:6:7:1.2.3.4", "::ffff:256.1.1.1", " ::1", "2001:db8::/32"}) {
    EXPECT_FALSE(ParseIpv6(bad, &b)) << bad;
  }
}

TEST(PrefixHierarchy, ChecksPathsAndTheirDepth) {
  uint32_t d = 0;
  ASSERT_TRUE(CheckPath("eu", 16, 0, &d).ok());
  EXPECT_EQ(d, 1u);
  ASSERT_TRUE(CheckPath("eu/fr/paris", 16, 0, &d).ok());
  EXPECT_EQ(d, 3u);
  ASSERT_TRUE(CheckPath("a/b/c", 3, 0, &d).ok());
  for (const char* bad : {"", "/", "/eu", "eu/", "eu//fr", "//"}) {
    const absl::Status s = CheckPath(bad, 16, 7, &d);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("key 7"), absl::string_view::npos) << s;
  }
  const absl::Status deep = CheckPath("a/b/c/d", 3, 2, &d);
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.message().find("max_depth=3"), absl::string_view::npos) << deep;
}

TEST(PrefixHierarchy, WritesPrefixTexts) {
  EXPECT_EQ(Ipv4PrefixText(0, 0), "0.0.0.0/0");
  EXPECT_EQ(Ipv4PrefixText(10, 1), "10.0.0.0/8");
  EXPECT_EQ(Ipv4PrefixText(0x0A01, 2), "10.1.0.0/16");
  EXPECT_EQ(Ipv4PrefixText(0x0A0102, 3), "10.1.2.0/24");
  EXPECT_EQ(Ipv4PrefixText(0x0A010203, 4), "10.1.2.3/32");
  EXPECT_EQ(Ipv6PrefixText("", 0), "::/0");
  EXPECT_EQ(Ipv6PrefixText(std::string("\x20\x01\x0d\xb8", 4), 2), "2001:db8::/32");
  EXPECT_EQ(Ipv6PrefixText(std::string("\x20\x01\x0d\xb8\x00\x00\x00\x01", 8), 4),
            "2001:db8:0:1::/64");
  std::string full;
  ASSERT_TRUE(ParseIpv6("2001:db8::1:0:0:1", &full));
  EXPECT_EQ(Ipv6PrefixText(full, 8), "2001:db8::1:0:0:1/128");  // the first longest run
  ASSERT_TRUE(ParseIpv6("1:0:2:0:3:0:4:5", &full));
  EXPECT_EQ(Ipv6PrefixText(full, 8), "1:0:2:0:3:0:4:5/128");  // single zeros stay
  ASSERT_TRUE(ParseIpv6("1:2:3:4:5:6:7:0", &full));
  EXPECT_EQ(Ipv6PrefixText(full, 8), "1:2:3:4:5:6:7:0/128");
  EXPECT_EQ(PathPrefixText(""), "*");
  EXPECT_EQ(PathPrefixText("eu/fr"), "eu/fr");
}

TEST(PrefixHierarchy, ReadsBackThePrefixesItWrites) {
  uint64_t v4 = 0;
  std::string bytes;
  uint32_t d = 0;
  for (uint32_t depth = 0; depth <= kIpv4Depth; ++depth) {
    const uint64_t key = depth == 0 ? 0 : uint64_t{0xC0A80A07} >> (32 - 8 * depth);
    ASSERT_TRUE(ParseIpv4Prefix(Ipv4PrefixText(key, depth), &v4, &d).ok());
    EXPECT_EQ(v4, key);
    EXPECT_EQ(d, depth);
  }
  std::string address;
  ASSERT_TRUE(ParseIpv6("2001:db8:1:2:3:4:5:6", &address));
  for (uint32_t depth = 0; depth <= kIpv6Depth; ++depth) {
    ASSERT_TRUE(ParseIpv6Prefix(Ipv6PrefixText(address.substr(0, 2 * depth), depth), &bytes, &d)
                    .ok());
    EXPECT_EQ(bytes, address.substr(0, 2 * depth));
    EXPECT_EQ(d, depth);
  }
  ASSERT_TRUE(ParseIpv4Prefix("10.1.2.3", &v4, &d).ok());
  EXPECT_EQ(d, 4u);
  ASSERT_TRUE(ParseIpv6Prefix("::1", &bytes, &d).ok());
  EXPECT_EQ(d, 8u);
  ASSERT_TRUE(ParsePathPrefix("*", 16, &bytes, &d).ok());
  EXPECT_EQ(bytes, "");
  EXPECT_EQ(d, 0u);
  ASSERT_TRUE(ParsePathPrefix("eu/fr", 16, &bytes, &d).ok());
  EXPECT_EQ(bytes, "eu/fr");
  EXPECT_EQ(d, 2u);
}

TEST(PrefixHierarchy, RefusesMalformedPrefixes) {
  uint64_t v4 = 0;
  std::string bytes;
  uint32_t d = 0;
  for (const char* bad : {"10.1.0.0/12", "10.1.0.0/33", "10.1.0.0/8", "10.1.0.0/", "10.1/16",
                          "10.1.0.0/016", "x", "10.1.0.0/-8", "10.1.0.0/1000"}) {
    EXPECT_EQ(ParseIpv4Prefix(bad, &v4, &d).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const char* bad : {"2001:db8::/33", "2001:db8::/16", "2001:db8::/129", "2001:db8::1/64",
                          "2001:db8:::/32", "10.0.0.0/8"}) {
    EXPECT_EQ(ParseIpv6Prefix(bad, &bytes, &d).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const char* bad : {"", "/", "eu/", "a/b/c/d"}) {
    EXPECT_EQ(ParsePathPrefix(bad, 3, &bytes, &d).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace streamstats::core
