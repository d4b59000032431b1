#include "config/settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace rlock::config {
namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/rlock-settings-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Settings, DefaultsToLocalRedis) {
  auto s = resolve({}, {}, {});
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->servers.size(), 1u);
  EXPECT_EQ(s->servers[0].url.host, "127.0.0.1");
  EXPECT_EQ(s->servers[0].url.port, 6379);
  EXPECT_EQ(s->prefix, "rlock:");
  EXPECT_EQ(s->servers[0].connect_timeout, Millis(2000));
}

TEST(Settings, CommandLineBeatsEnvironmentBeatsFile) {
  Layer cli, file;
  Environment env;
  file.urls = {"redis://file:1"};
  file.prefix = "file:";
  env.rlock_url = "redis://env:2";
  env.prefix = "env:";
  auto s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].url.host, "env");
  EXPECT_EQ(s->prefix, "env:");
  cli.urls = {"redis://cli:3"};
  cli.prefix = "cli:";
  s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].url.host, "cli");
  EXPECT_EQ(s->prefix, "cli:");
  s = resolve({}, {}, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].url.host, "file");
}

TEST(Settings, RlockUrlBeatsRedisUrl) {
  Environment env;
  env.redis_url = "redis://generic:1";
  env.rlock_url = "redis://specific:2";
  auto s = resolve({}, env, {});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].url.host, "specific");
}

TEST(Settings, PasswordInUrlWarnsButWorks) {
  Layer cli;
  cli.urls = {"redis://:s3cret@127.0.0.1:6379"};
  auto s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_EQ(s->warnings[0].find("s3cret"), std::string::npos);
  EXPECT_EQ(s->servers[0].url.password, "s3cret");
}

TEST(Settings, PasswordFileBeatsEnvironment) {
  auto path = write_temp("fromfile\n");
  Layer cli;
  cli.password_file = path;
  Environment env;
  env.password = "fromenv";
  auto s = resolve(cli, env, {});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].password, "fromfile");
  EXPECT_TRUE(s->warnings.empty());
  std::remove(path.c_str());
}

TEST(Settings, RejectsBadValues) {
  Layer cli;
  cli.connect_timeout = "soon";
  EXPECT_EQ(resolve(cli, {}, {}).error().code, Error::Code::usage);
  Layer prefix;
  prefix.prefix = "a{b";
  EXPECT_EQ(resolve(prefix, {}, {}).error().code, Error::Code::usage);
  Layer url;
  url.urls = {"ftp://x"};
  EXPECT_EQ(resolve(url, {}, {}).error().code, Error::Code::usage);
}

TEST(ConfigFile, ReadsLongOptionNames) {
  auto path = write_temp("# comment\nurl = redis://a:1, redis://b:2\nprefix=p:\ntls = yes\n");
  auto layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value());
  EXPECT_EQ(layer->urls.size(), 2u);
  EXPECT_EQ(layer->prefix, "p:");
  EXPECT_EQ(layer->tls, true);
  std::remove(path.c_str());
}

TEST(ConfigFile, BadLinesAreConfigErrorsWithLineNumber) {
  auto path = write_temp("url = redis://a\nbogus = 1\n");
  auto layer = read_config_file(path);
  ASSERT_FALSE(layer.has_value());
  EXPECT_EQ(layer.error().code, Error::Code::config);
  EXPECT_NE(layer.error().message.find(":2:"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_EQ(read_config_file("/nonexistent/rlock.conf").error().code, Error::Code::config);
}

}  // namespace
}  // namespace rlock::config
