#include "redis/url.h"

#include <gtest/gtest.h>

namespace rlock::redis {
namespace {

Url parsed(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_TRUE(url.has_value()) << text << ": " << url.error().message;
  return url.value_or(Url{});
}

Error rejected(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_FALSE(url.has_value()) << text << " was accepted";
  return url ? Error{} : url.error();
}

TEST(UrlParser, ParsesHostPortAndDb) {
  const Url url = parsed("redis://redis.example.com:6380/3");
  EXPECT_EQ(url.scheme, Url::Scheme::tcp);
  EXPECT_EQ(url.host, "redis.example.com");
  EXPECT_EQ(url.port, 6380);
  EXPECT_EQ(url.db, 3);
  EXPECT_FALSE(url.user);
  EXPECT_FALSE(url.password);
}

TEST(UrlParser, DefaultsToPort6379AndDbZero) {
  for (const char* text : {"redis://localhost", "redis://localhost/"}) {
    const Url url = parsed(text);
    EXPECT_EQ(url.port, 6379) << text;
    EXPECT_EQ(url.db, 0) << text;
  }
}

TEST(UrlParser, RedissMeansTls) {
  EXPECT_EQ(parsed("rediss://cache:6390").scheme, Url::Scheme::tls);
}

TEST(UrlParser, ParsesUserAndPassword) {
  const Url url = parsed("redis://alice:s3cret@127.0.0.1");
  EXPECT_EQ(url.user, "alice");
  EXPECT_EQ(url.password, "s3cret");
}

TEST(UrlParser, PasswordWithoutUserLeavesUserUnset) {
  const Url url = parsed("redis://:s3cret@127.0.0.1");
  EXPECT_FALSE(url.user);
  EXPECT_EQ(url.password, "s3cret");
}

TEST(UrlParser, UserWithoutPassword) {
  const Url url = parsed("redis://alice@127.0.0.1");
  EXPECT_EQ(url.user, "alice");
  EXPECT_FALSE(url.password);
}

TEST(UrlParser, PercentDecodesUserAndPassword) {
  const Url url = parsed("redis://al%40ice:p%3Aa%2Fss%25@host");
  EXPECT_EQ(url.user, "al@ice");
  EXPECT_EQ(url.password, "p:a/ss%");
}

TEST(UrlParser, LastAtEndsTheUserInfo) {
  const Url url = parsed("redis://alice:p@ss/w@host:7000");
  EXPECT_EQ(url.password, "p@ss/w");
  EXPECT_EQ(url.host, "host");
  EXPECT_EQ(url.port, 7000);
}

TEST(UrlParser, ParsesBracketedIpv6) {
  const Url url = parsed("redis://[::1]:6380/2");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 6380);
  EXPECT_EQ(url.db, 2);
  EXPECT_EQ(parsed("redis://[fe80::1]").port, 6379);
}

TEST(UrlParser, ParsesUnixSocketWithDb) {
  const Url url = parsed("unix:///run/redis/redis.sock?db=4");
  EXPECT_EQ(url.scheme, Url::Scheme::unix_socket);
  EXPECT_EQ(url.path, "/run/redis/redis.sock");
  EXPECT_EQ(url.db, 4);
  EXPECT_EQ(parsed("unix:///tmp/r.sock").db, 0);
}

TEST(UrlParser, AcceptsLargestDb) {
  EXPECT_EQ(parsed("redis://h/2147483647").db, 2147483647);
}

TEST(UrlParser, RejectsUnknownScheme) {
  EXPECT_EQ(rejected("http://localhost").code, Error::Code::usage);
  rejected("localhost:6379");
  rejected("REDIS//localhost");
}

TEST(UrlParser, RejectsEmptyHost) {
  rejected("redis://");
  rejected("redis://:6379");
  rejected("redis://alice:pw@");
  rejected("redis://[]:6379");
}

TEST(UrlParser, RejectsPortOutOfRange) {
  rejected("redis://h:0");
  rejected("redis://h:65536");
  rejected("redis://h:99999999999999999999");
}

TEST(UrlParser, RejectsNonNumericPort) {
  rejected("redis://h:");
  rejected("redis://h:abc");
  rejected("redis://h:+6379");
  rejected("redis://h:63 79");
}

TEST(UrlParser, RejectsBadDb) {
  rejected("redis://h/-1");
  rejected("redis://h/x");
  rejected("redis://h/2147483648");
  rejected("unix:///tmp/r.sock?db=");
  rejected("unix:///tmp/r.sock?db=1x");
}

TEST(UrlParser, RejectsTrailingGarbage) {
  rejected("redis://h:6379/0/1");
  rejected("redis://h/0?x=1");
  rejected("redis://h:6379x");
  rejected("redis://[::1]x");
  rejected("redis://h h");
  rejected("unix:///tmp/r.sock?timeout=1");
}

TEST(UrlParser, RejectsEmptyUnixPath) {
  rejected("unix://");
  rejected("unix:///");
  rejected("unix://?db=1");
  rejected("unix://relative.sock");
}

TEST(UrlParser, RejectsInvalidIpv6) {
  rejected("redis://[::1");
  rejected("redis://[nothex]:6379");
}

TEST(UrlParser, RejectsBadPercentEncoding) {
  rejected("redis://u:%zz@h");
  rejected("redis://u:%4@h");
}

TEST(UrlParser, ErrorNamesTheUrlWithoutPassword) {
  const Error error = rejected("redis://alice:hunter2@h:0");
  EXPECT_NE(error.message.find("redis://alice@h:0"), std::string::npos) << error.message;
  EXPECT_EQ(error.message.find("hunter2"), std::string::npos) << error.message;
  EXPECT_NE(rejected("http://:hunter2@h").message.find("http://h:"), std::string::npos);
  EXPECT_EQ(rejected("redis://u:hun/ter2@h:x").message.find("ter2"), std::string::npos);
}

TEST(UrlRedaction, OmitsPassword) {
  EXPECT_EQ(parsed("redis://alice:s3cret@127.0.0.1").redacted(), "redis://alice@127.0.0.1:6379/0");
  EXPECT_EQ(parsed("rediss://:s3cret@cache:6390/2").redacted(), "rediss://cache:6390/2");
}

TEST(UrlRedaction, BracketsIpv6AndEncodesUser) {
  EXPECT_EQ(parsed("redis://a%40b@[::1]:6380").redacted(), "redis://a%40b@[::1]:6380/0");
}

TEST(UrlRedaction, RendersUnixSocket) {
  EXPECT_EQ(parsed("unix:///tmp/r.sock").redacted(), "unix:///tmp/r.sock");
  EXPECT_EQ(parsed("unix:///tmp/r.sock?db=3").redacted(), "unix:///tmp/r.sock?db=3");
}

TEST(UrlRedaction, RoundTripsThroughParser) {
  const Url url = parsed(parsed("redis://a%3Ab:pw@[::1]:7000/5").redacted());
  EXPECT_EQ(url.user, "a:b");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 7000);
  EXPECT_EQ(url.db, 5);
}

TEST(UrlParser, CommaListsSayWhatIsNotSupportedYet) {
  for (auto text : {"redis://a:1,redis://b:2", "redis://a:1/0,b:2/0", "redis://a,b",
                    "unix:///a.sock,unix:///b.sock", "redis://a/0,redis://:pw@b/0"}) {
    auto error = rejected(text);
    EXPECT_EQ(error.code, Error::Code::usage);
    EXPECT_NE(error.message.find("comma list"), std::string::npos) << text << ": " << error.message;
    EXPECT_EQ(error.message.find("pw"), std::string::npos) << error.message;
  }
  // A comma in a password is just a character.
  EXPECT_EQ(parsed("redis://u:a,b@h:1").password, "a,b");
}

}  // namespace
}  // namespace rlock::redis
