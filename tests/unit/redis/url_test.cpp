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

TEST(UrlParser, CommaListsOfUrlsInOneUrlSayWhereAListGoes) {
  for (auto text :
       {"redis://a:1,redis://b:2", "redis://a:1/0,rediss://b:2/0", "unix:///a.sock,unix:///b.sock",
        "redis://a/0,redis://:pw@b/0", "redis-sentinel://s:1#m,redis-sentinel://t:2#m"}) {
    auto error = rejected(text);
    EXPECT_EQ(error.code, Error::Code::usage);
    EXPECT_NE(error.message.find("comma list"), std::string::npos) << text << ": " << error.message;
    EXPECT_NE(error.message.find("its own --url"), std::string::npos) << error.message;
    EXPECT_EQ(error.message.find("pw"), std::string::npos) << error.message;
  }
  // A comma in a password is just a character.
  EXPECT_EQ(parsed("redis://u:a,b@h:1").password, "a,b");
  // So is one in a socket's path.
  EXPECT_EQ(parsed("unix:///tmp/a,b.sock").path, "/tmp/a,b.sock");
}

TEST(UrlParser, ACommaAfterTheDatabaseSaysWhereSeedsAndMembersGo) {
  for (auto text : {"redis://a:1/0,b:2", "redis://a:1,b:2/0,c:3", "rediss://:pw@a/3,b"}) {
    auto error = rejected(text);
    EXPECT_EQ(error.code, Error::Code::usage);
    EXPECT_NE(error.message.find("a comma after the database"), std::string::npos)
        << text << ": " << error.message;
    EXPECT_EQ(error.message.find("pw"), std::string::npos) << error.message;
  }
  EXPECT_NE(rejected("redis://a:1/x").message.find("database must be"), std::string::npos);
}

TEST(UrlParser, OneHostFillsHosts) {
  const Url url = parsed("redis://h:7000/1");
  ASSERT_EQ(url.hosts.size(), 1u);
  EXPECT_EQ(url.hosts[0], (Endpoint{"h", 7000}));
  EXPECT_FALSE(url.cluster_seeds());
  EXPECT_FALSE(url.sentinel);
  EXPECT_TRUE(parsed("unix:///tmp/r.sock").hosts.empty());
}

TEST(UrlParser, SeveralHostsAreClusterSeeds) {
  const Url url = parsed("redis://u:pw@h1:7000,h2,[::1]:7002/3");
  EXPECT_EQ(url.hosts, (std::vector<Endpoint>{{"h1", 7000}, {"h2", 6379}, {"::1", 7002}}));
  EXPECT_EQ(url.host, "h1");
  EXPECT_EQ(url.port, 7000);
  EXPECT_EQ(url.db, 3);
  EXPECT_EQ(url.user, "u");
  EXPECT_EQ(url.password, "pw");
  EXPECT_TRUE(url.cluster_seeds());
  EXPECT_EQ(parsed("rediss://a:1,b:2").scheme, Url::Scheme::tls);
  // Duplicates are the user's business.
  EXPECT_EQ(parsed("redis://a:1,a:1").hosts.size(), 2u);
}

TEST(UrlParser, ParsesSentinelUrls) {
  const Url url = parsed("redis-sentinel://u:p%23w@s1:26380,s2,[::1]/2#my%20master");
  EXPECT_TRUE(url.sentinel);
  EXPECT_FALSE(url.cluster_seeds());
  EXPECT_EQ(url.scheme, Url::Scheme::tcp);
  EXPECT_EQ(url.master_name, "my master");
  EXPECT_EQ(url.hosts, (std::vector<Endpoint>{{"s1", 26380}, {"s2", 26379}, {"::1", 26379}}));
  EXPECT_EQ(url.db, 2);
  EXPECT_EQ(url.user, "u");
  EXPECT_EQ(url.password, "p#w");
  const Url tls = parsed("rediss-sentinel://s1#m");
  EXPECT_TRUE(tls.sentinel);
  EXPECT_EQ(tls.scheme, Url::Scheme::tls);
  EXPECT_EQ(tls.port, 26379);
  EXPECT_EQ(tls.db, 0);
  // The last '#' starts the name: an unencoded '#' in a password stays.
  EXPECT_EQ(parsed("redis-sentinel://:a#b@s#m").password, "a#b");
  EXPECT_EQ(parsed("redis-sentinel://:a#b@s#m").master_name, "m");
}

TEST(UrlParser, SentinelUrlNeedsAMasterName) {
  for (auto text : {"redis-sentinel://s1:26379,s2:26379/0", "redis-sentinel://s1#",
                    "rediss-sentinel://s1/0#", "redis-sentinel://s1#%zz"}) {
    auto error = rejected(text);
    EXPECT_EQ(error.code, Error::Code::usage);
  }
  EXPECT_NE(rejected("redis-sentinel://s1").message.find("#MASTER"), std::string::npos);
}

TEST(UrlParser, MasterNameOnlyForSentinel) {
  EXPECT_NE(rejected("redis://h:1/0#m").message.find("only for redis-sentinel"), std::string::npos);
  rejected("rediss://h#m");
  // A '#' before the user info ends is part of the password.
  EXPECT_EQ(parsed("redis://u:p#w@h").password, "p#w");
}

TEST(UrlParser, RejectsBadHostLists) {
  for (auto text : {"redis://a:1,,b:2", "redis://a:1,", "redis://,a:1", "redis://a:1,b:0",
                    "redis://a:1,b:x/0", "redis://a,[::1", "redis://a, b", "redis-sentinel://a,#m",
                    "redis-sentinel://a:1,b:99999#m", "redis://a,b/x"})
    EXPECT_EQ(rejected(text).code, Error::Code::usage);
}

TEST(UrlRedaction, ShowsEveryHostAndTheMasterButNoPassword) {
  EXPECT_EQ(parsed("redis://u:pw@a:1,[::1]:2/3").redacted(), "redis://u@a:1,[::1]:2/3");
  EXPECT_EQ(parsed("rediss-sentinel://:pw@s1,s2:5#my%20master").redacted(),
            "rediss-sentinel://s1:26379,s2:5/0#my%20master");
  const Url round = parsed(parsed("redis-sentinel://u:pw@s1:1,s2:2/4#m%23x").redacted());
  EXPECT_EQ(round.master_name, "m#x");
  EXPECT_EQ(round.hosts.size(), 2u);
  EXPECT_EQ(round.db, 4);
  EXPECT_FALSE(round.password);
}

TEST(UrlRedaction, AnInvalidUrlIsShownWithoutPasswordOrQuery) {
  for (const char* text :
       {"redis://h:99999/0?password=Xpw2", "unix:///tmp/x.sock?db=0&password=Xpw",
        "redis://:Xpw@h:99999/0", "redis://u:Xpw@h:99999?db=1", "redis://:a?Xpw@h:99999/0",
        // A password typed without its @host reads as a port: not shown.
        "redis://:Xpw", "redis://user:Xpw", "redis://h:1,h2:Xpw/0", "redis://:a/Xpw",
        "redis://:Xpw,more", "redis://:123Xpw",
        // Other clients' forms, as a REDIS_URL set for another program may
        // be (StackExchange.Redis options, a ;-option, a fragment).
        "cache.internal:6380,password=Xpw,ssl=True", "redis://cache/0;password=Xpw",
        "redis://cache:6379/0#Xpw", "redis://cache:6379/0 Xpw"}) {
    auto url = parse_url(text);
    ASSERT_FALSE(url.has_value()) << text;
    EXPECT_EQ(url.error().message.find("Xpw"), std::string::npos) << url.error().message;
    EXPECT_NE(url.error().message.find("invalid URL "), std::string::npos) << url.error().message;
  }
}

TEST(UrlRedaction, AnInvalidUrlKeepsItsHostsAndDatabase) {
  auto options = parse_url("cache.internal:6380,password=Xpw");
  ASSERT_FALSE(options.has_value());
  EXPECT_NE(options.error().message.find("invalid URL cache.internal:6380,password...: "),
            std::string::npos)
      << options.error().message;
  auto fragment = parse_url("redis://cache:6379/1#Xpw");
  ASSERT_FALSE(fragment.has_value());
  EXPECT_NE(fragment.error().message.find("invalid URL redis://cache:6379/1...: "),
            std::string::npos)
      << fragment.error().message;
  // What is no secret stays as given: the value was taken whole.
  auto bracketed = parse_url("[redis://cache:6379/0]");
  ASSERT_FALSE(bracketed.has_value());
  EXPECT_NE(bracketed.error().message.find("invalid URL [redis://cache:6379/0]: "),
            std::string::npos)
      << bracketed.error().message;
}

TEST(UrlParser, OptionsAfterAQuestionMarkAreNamedAsSuch) {
  for (const char* text : {"redis://127.0.0.1:6379/0?foo=bar", "redis://h?db=2", "rediss://h/?x"}) {
    auto url = parse_url(text);
    ASSERT_FALSE(url.has_value()) << text;
    EXPECT_NE(url.error().message.find("no options after '?'"), std::string::npos)
        << url.error().message;
  }
}

TEST(UrlRedaction, APortThatIsANumberStaysInTheMessage) {
  auto url = parse_url("redis://h:0/0");
  ASSERT_FALSE(url.has_value());
  EXPECT_EQ(url.error().message,
            "invalid URL redis://h:0/0: port must be a number from 1 to 65535");
  // Beyond any port, it may be a numeric password typed without @host.
  auto beyond = parse_url("redis://default:20240915/0");
  ASSERT_FALSE(beyond.has_value());
  EXPECT_EQ(beyond.error().message.find("20240915"), std::string::npos) << beyond.error().message;
}

TEST(UrlDeployments, EntriesWithASchemeStartADeployment) {
  using List = std::vector<std::string>;
  EXPECT_EQ(split_deployments("redis://a:1,b:2/0"), (List{"redis://a:1,b:2/0"}));
  EXPECT_EQ(split_deployments("redis://a:1/0, redis://b:2/0"),
            (List{"redis://a:1/0", "redis://b:2/0"}));
  EXPECT_EQ(split_deployments("redis-sentinel://s1:1,s2:2/0#m,unix:///r.sock"),
            (List{"redis-sentinel://s1:1,s2:2/0#m", "unix:///r.sock"}));
  EXPECT_EQ(split_deployments("redis://u:a,b@h"), (List{"redis://u:a,b@h"}));
  EXPECT_EQ(split_deployments("redis://a,"), (List{"redis://a,"}));
  EXPECT_EQ(split_deployments("  "), List{});
}

TEST(UrlDeployments, ATrailingCommaIsSaidAsSuch) {
  for (const char* text : {"redis://a,", "redis://127.0.0.1:6379/0,", "unix:///r.sock,"}) {
    auto url = parse_url(text);
    ASSERT_FALSE(url.has_value()) << text;
    EXPECT_NE(url.error().message.find("ends with a comma"), std::string::npos)
        << url.error().message;
  }
  // An empty entry inside a list ends the URL before it the same way: both
  // are named.
  const auto parts = split_deployments("redis://a/0,,redis://b/0");
  ASSERT_EQ(parts.size(), 2u);
  auto url = parse_url(parts[0]);
  ASSERT_FALSE(url.has_value());
  EXPECT_NE(url.error().message.find("two commas have nothing between them"), std::string::npos)
      << url.error().message;
}

}  // namespace
}  // namespace rlock::redis
