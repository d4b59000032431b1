#include "config/settings.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

TEST(Settings, ACommandLineUrlsCredentialsBeatTheConfigFiles) {
  auto path = write_temp("filepw\n");
  chmod(path.c_str(), 0600);
  Layer cli, file;
  file.user = "file-user";
  file.password_file = path;
  cli.urls = {"redis://url-user:urlpw@h:1"};
  auto s = resolve(cli, {}, file);
  ASSERT_TRUE(s.has_value());
  // Unset: the URL's own (Connection takes options.user, else url.user).
  EXPECT_FALSE(s->servers[0].user);
  EXPECT_FALSE(s->servers[0].password);
  // A URL without credentials gets the config file's.
  cli.urls = {"redis://h:1"};
  s = resolve(cli, {}, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].user, "file-user");
  EXPECT_EQ(s->servers[0].password, "filepw");
  // The config file's own URL comes after its user and password-file.
  file.urls = {"redis://url-user:urlpw@h:1"};
  s = resolve({}, {}, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].user, "file-user");
  EXPECT_EQ(s->servers[0].password, "filepw");
  // --user and RLOCK_PASSWORD still come first.
  cli.urls = {"redis://url-user:urlpw@h:1"};
  cli.user = "cli-user";
  Environment env;
  env.password = "envpw";
  s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->servers[0].user, "cli-user");
  EXPECT_EQ(s->servers[0].password, "envpw");
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

TEST(ConfigFile, TrailingCommentsAreNotPartOfTheValue) {
  auto path = write_temp(
      "url = redis://:pa#ss@h:7000/2   # the lock server\nprefix = p: # ours\ntls = no\t# off\n");
  auto layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value()) << layer.error().message;
  ASSERT_EQ(layer->urls.size(), 1u);
  EXPECT_EQ(layer->urls[0], "redis://:pa#ss@h:7000/2");
  EXPECT_EQ(layer->prefix, "p:");
  EXPECT_EQ(layer->tls, false);
  std::remove(path.c_str());
}

TEST(ConfigFile, AByteOrderMarkAndWindowsLineEndsAreNotPartOfKeysOrValues) {
  auto path = write_temp("\xEF\xBB\xBFurl = redis://a:1\r\nprefix = p:\r\n");
  auto layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value()) << layer.error().message;
  ASSERT_EQ(layer->urls.size(), 1u);
  EXPECT_EQ(layer->urls[0], "redis://a:1");
  EXPECT_EQ(layer->prefix, "p:");
  std::remove(path.c_str());
  // Only at the very start: anywhere else it is a byte of a key.
  path = write_temp("prefix = p:\n\xEF\xBB\xBFurl = redis://a:1\n");
  layer = read_config_file(path);
  ASSERT_FALSE(layer.has_value());
  EXPECT_NE(layer.error().message.find(":2: unknown key"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ConfigFile, BadValuesAreConfigErrorsNamingFileAndLine) {
  for (const char* text : {"connect-timeout = soon\n", "prefix = a{b\n", "url = ftp://x\n",
                           "tls = maybe\n", "connect-timeout = 0\n", "url =\n"}) {
    auto path = write_temp(std::string("# header\n") + text);
    auto layer = read_config_file(path);
    ASSERT_FALSE(layer.has_value()) << text;
    EXPECT_EQ(layer.error().code, Error::Code::config) << text;
    EXPECT_NE(layer.error().message.find(path + ":2: "), std::string::npos)
        << layer.error().message;
    std::remove(path.c_str());
  }
}

TEST(ConfigFile, AKeySetTwiceIsAConfigErrorExceptUrlWhoseLinesAddMembers) {
  auto path = write_temp("user = a\nprefix = p:\n# user = c\nuser = b\n");
  auto layer = read_config_file(path);
  ASSERT_FALSE(layer.has_value());
  EXPECT_EQ(layer.error().code, Error::Code::config);
  EXPECT_EQ(layer.error().message,
            path + ":4: user: set again (first on line 1); give each key once");
  std::remove(path.c_str());
  path = write_temp("url = redis://a:1\nurl = redis://b:1\nurl = redis://c:1\n");
  layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value()) << layer.error().message;
  EXPECT_EQ(layer->urls.size(), 3u);
  std::remove(path.c_str());
}

TEST(ConfigFile, DirectoryIsAConfigError) {
  auto layer = read_config_file("/tmp");
  ASSERT_FALSE(layer.has_value());
  EXPECT_EQ(layer.error().code, Error::Code::config);
  EXPECT_NE(layer.error().message.find("directory"), std::string::npos);
}

TEST(ConfigFile, SizeIsCapped) {
  auto path = write_temp(std::string(k_max_file_size + 1, '#'));
  auto layer = read_config_file(path);
  ASSERT_FALSE(layer.has_value());
  EXPECT_EQ(layer.error().code, Error::Code::config);
  EXPECT_NE(layer.error().message.find("larger than 64 KiB"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ConfigFile, RefusesAFileOthersCanWrite) {
  for (mode_t mode : {0620, 0602, 0666}) {
    auto path = write_temp("url = redis://a\n");
    chmod(path.c_str(), mode);
    auto layer = read_config_file(path);
    ASSERT_FALSE(layer.has_value()) << mode;
    EXPECT_EQ(layer.error().code, Error::Code::config);
    EXPECT_NE(layer.error().message.find("chmod go-w"), std::string::npos);
    std::remove(path.c_str());
  }
  // /dev/zero: writable by everyone, and endless.
  EXPECT_EQ(read_config_file("/dev/zero").error().code, Error::Code::config);
}

TEST(SecretFile, WarnsWhenOthersCanReadIt) {
  auto path = write_temp("s3cret\nignored\n");
  chmod(path.c_str(), 0644);
  std::vector<std::string> warnings;
  auto line = read_secret_file(path, "--password-file", Error::Code::usage, warnings);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "s3cret");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("chmod o-r"), std::string::npos);
  std::remove(path.c_str());
}

TEST(SecretFile, EmptyFileOrDirectoryIsAnError) {
  std::vector<std::string> warnings;
  auto path = write_temp("\n");
  EXPECT_FALSE(read_secret_file(path, "--password-file", Error::Code::usage, warnings));
  std::remove(path.c_str());
  auto dir = read_secret_file("/tmp", "--password-file", Error::Code::usage, warnings);
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().code, Error::Code::usage);
}

TEST(Settings, ErrorsNameTheVariableTheyCameFrom) {
  Environment env;
  env.connect_timeout = std::string(300, '9');
  auto s = resolve({}, env, {});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::usage);
  EXPECT_TRUE(s.error().message.starts_with("RLOCK_CONNECT_TIMEOUT: ")) << s.error().message;
  Environment url;
  url.rlock_url = "ftp://x";
  EXPECT_TRUE(resolve({}, url, {}).error().message.starts_with("RLOCK_URL: "));
}

TEST(Settings, InsecureRefusesACaCertificate) {
  Layer cli;
  cli.insecure = true;
  cli.cacert = "/ca.pem";
  EXPECT_EQ(resolve(cli, {}, {}).error().code, Error::Code::usage);
  Layer file;
  file.insecure = true;
  file.cacertdir = "/certs";
  file.insecure_origin = "rlock.conf:3";
  auto s = resolve({}, {}, file);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::config);
  EXPECT_NE(s.error().message.find("rlock.conf:3"), std::string::npos);
}

TEST(Settings, InsecureWarnsOverTls) {
  Layer cli;
  cli.insecure = true;
  cli.urls = {"rediss://h"};
  auto s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("not verified"), std::string::npos);
}

TEST(Replicas, ParsesAllOrACount) {
  EXPECT_TRUE(parse_replicas("all")->all());
  EXPECT_EQ(parse_replicas("0")->count, 0);
  EXPECT_EQ(parse_replicas("2")->count, 2);
  EXPECT_EQ(parse_replicas("1000")->count, 1000);
  for (auto bad : {"", "ALL", "-1", "+1", "1.5", "1001", "2 ", "none"}) {
    auto parsed = parse_replicas(bad);
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_EQ(parsed.error().code, Error::Code::usage);
  }
}

TEST(Settings, ReplicasDefaultToAllAndTheCommandLineBeatsTheFile) {
  auto s = resolve({}, {}, {});
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->replicas.all());
  Layer cli, file;
  file.replicas = "2";
  s = resolve(cli, {}, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->replicas.count, 2);
  cli.replicas = "0";
  s = resolve(cli, {}, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->replicas.count, 0);
  cli.replicas = "some";
  s = resolve(cli, {}, file);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::usage);
  EXPECT_TRUE(s.error().message.starts_with("--replicas: ")) << s.error().message;
}

TEST(ConfigFile, ReadsSentinelKeysAndReplicas) {
  auto path = write_temp(
      "url = redis-sentinel://s1:26379, s2:26380/1#mymaster\nsentinel-user = watcher\n"
      "sentinel-password-file = /etc/rlock/sentinel.pw\nreplicas = all\n");
  auto layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value()) << layer.error().message;
  EXPECT_EQ(layer->urls, std::vector<std::string>{"redis-sentinel://s1:26379,s2:26380/1#mymaster"});
  EXPECT_EQ(layer->sentinel_user, "watcher");
  EXPECT_EQ(layer->sentinel_password_file, "/etc/rlock/sentinel.pw");
  EXPECT_EQ(layer->sentinel_password_file_origin, path + ":3");
  EXPECT_EQ(layer->replicas, "all");
  std::remove(path.c_str());
}

TEST(ConfigFile, BadReplicasOrSentinelUrlNameFileAndLine) {
  for (const char* text : {"replicas = -1\n", "replicas = most\n",
                           "url = redis-sentinel://s1:26379/0\n", "url = redis://a:1,,b\n"}) {
    auto path = write_temp(std::string("# header\n") + text);
    auto layer = read_config_file(path);
    ASSERT_FALSE(layer.has_value()) << text;
    EXPECT_EQ(layer.error().code, Error::Code::config) << text;
    EXPECT_NE(layer.error().message.find(path + ":2: "), std::string::npos)
        << layer.error().message;
    std::remove(path.c_str());
  }
}

TEST(Settings, ASentinelUrlIsOneDeployment) {
  Environment env;
  env.rlock_url = "redis-sentinel://u:pw@s1:1, s2:2/3#mymaster";
  auto s = resolve({}, env, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->servers.size(), 1u);
  const auto& url = s->servers[0].url;
  EXPECT_TRUE(url.sentinel);
  EXPECT_EQ(url.master_name, "mymaster");
  EXPECT_EQ(url.hosts.size(), 2u);
  EXPECT_EQ(url.db, 3);
  // The URL's password is the master's, and warns as any password in a URL.
  EXPECT_EQ(url.password, "pw");
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_EQ(s->warnings[0].find("pw@"), std::string::npos);
  EXPECT_FALSE(s->sentinel_user);
  EXPECT_FALSE(s->sentinel_password);
  Layer cli;
  cli.urls = {"rediss-sentinel://s1,s2#m"};
  s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_TRUE(s->servers[0].tls.enabled);
  cli.urls = {"redis-sentinel://:pw@s1,s2#m"};
  s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("command line"), std::string::npos);
}

TEST(Settings, ClusterSeedsAreOneDeployment) {
  Layer cli;
  cli.urls = {"redis://a:1,b:2"};
  auto s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->servers.size(), 1u);
  EXPECT_TRUE(s->servers[0].url.cluster_seeds());
  EXPECT_EQ(s->servers[0].url.hosts.size(), 2u);
  Environment env;
  env.rlock_url = "redis://a:1,b:2/0";
  s = resolve({}, env, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->servers.size(), 1u);
  Layer file;
  file.urls = {"redis://a:1,b:2"};
  file.url_origin = "rlock.conf:4";
  s = resolve({}, {}, file);
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->servers.size(), 1u);
}

TEST(Settings, SeveralDeploymentsAreAQuorum) {
  Environment env;
  env.rlock_url = "redis://a:1/0,redis-sentinel://s1,s2#m";
  auto s = resolve({}, env, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->servers.size(), 2u);
  EXPECT_TRUE(s->servers[1].url.sentinel);
  Layer cli;
  cli.urls = {"redis://a:1/0", "redis://b:2/0", "redis://c:3/0"};
  s = resolve(cli, {}, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->servers.size(), 3u);
  cli.urls = {"redis://a:1/0,redis://b:2/0"};  // one --url: one deployment, or an error
  s = resolve(cli, {}, {});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::usage);
}

TEST(Settings, AQuorumCountsEachServerOnce) {
  // The same server twice (another db, another case of its name, a Cluster
  // seed again, the same Sentinel master) would vote twice.
  for (const std::vector<std::string>& urls :
       {std::vector<std::string>{"redis://a:1/0", "redis://a:1/0", "redis://b:2/0"},
        {"redis://a:1/0", "redis://A:1/3"},
        {"redis://a:1,b:2", "redis://c:3", "redis://b:2"},
        {"unix:///run/r.sock", "unix:///run/r.sock?db=2"},
        {"redis-sentinel://s1,s2#m", "redis-sentinel://s2#m", "redis://c:3"}}) {
    Layer cli;
    cli.urls = urls;
    auto s = resolve(cli, {}, {});
    ASSERT_FALSE(s.has_value()) << urls[0] << " " << urls[1];
    EXPECT_EQ(s.error().code, Error::Code::usage);
    EXPECT_NE(s.error().message.find("same server"), std::string::npos) << s.error().message;
  }
  // From the config file: a config error.
  Layer file;
  file.urls = {"redis://a:1", "redis://a:1"};
  auto s = resolve({}, {}, file);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::config);
  // Distinct servers, and two masters of the same Sentinels, are fine.
  Layer cli;
  cli.urls = {"redis-sentinel://s1,s2#m1", "redis-sentinel://s1,s2#m2", "redis://a:2"};
  s = resolve(cli, {}, {});
  EXPECT_TRUE(s.has_value()) << s.error().message;
}

TEST(ConfigFile, SeveralUrlLinesAddUpToAQuorum) {
  auto path = write_temp("url = redis://a:1\nurl = redis-sentinel://s1,s2#m\n");
  auto layer = read_config_file(path);
  ASSERT_TRUE(layer.has_value()) << layer.error().message;
  EXPECT_EQ(layer->urls.size(), 2u);
  auto s = resolve({}, {}, *layer);
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->servers.size(), 2u);
  std::remove(path.c_str());
}

TEST(Settings, SentinelPasswordFileBeatsEnvironmentBeatsConfigFile) {
  auto cli_file = write_temp("from-cli-file\n");
  auto conf_file = write_temp("from-config-file\n");
  Layer cli, file;
  Environment env;
  file.sentinel_password_file = conf_file;
  file.sentinel_user = "file-user";
  auto s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->sentinel_password, "from-config-file");
  EXPECT_EQ(s->sentinel_user, "file-user");
  env.sentinel_password = "from-env";
  s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->sentinel_password, "from-env");
  cli.sentinel_password_file = cli_file;
  cli.sentinel_user = "cli-user";
  s = resolve(cli, env, file);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->sentinel_password, "from-cli-file");
  EXPECT_EQ(s->sentinel_user, "cli-user");
  // The master's password is not the Sentinels'.
  EXPECT_FALSE(s->servers[0].password);
  std::remove(cli_file.c_str());
  std::remove(conf_file.c_str());
}

TEST(Settings, SentinelPasswordFileErrorsSayWhichFile) {
  Layer cli;
  cli.sentinel_password_file = "/nonexistent/sentinel.pw";
  auto s = resolve(cli, {}, {});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::usage);
  EXPECT_NE(s.error().message.find("--sentinel-password-file"), std::string::npos);
  Layer file;
  file.sentinel_password_file = "/nonexistent/sentinel.pw";
  file.sentinel_password_file_origin = "rlock.conf:7";
  s = resolve({}, {}, file);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, Error::Code::config);
  EXPECT_NE(s.error().message.find("rlock.conf:7"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace rlock::config
