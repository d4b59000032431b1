#include "redis/openssl_loader.h"

#include <gtest/gtest.h>

namespace rlock::redis {
namespace {

TEST(OpenSslLoader, MissingLibraryIsOneLineUnavailableError) {
  const auto before = SSL_new;
  const auto loaded = detail::load_openssl_from("libcrypto.so.3", "librlock-no-such-ssl.so.9");
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, Error::Code::unreachable);  // exit status 69
  EXPECT_NE(loaded.error().message.find("librlock-no-such-ssl.so.9"), std::string::npos);
  EXPECT_EQ(loaded.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(SSL_new, before);  // all or nothing
}

TEST(OpenSslLoader, ALibraryWithoutTheFunctionsIsRefused) {
  // libc is there, but is not OpenSSL: the first lookup fails.
  const auto loaded = detail::load_openssl_from("libc.so.6", "libc.so.6");
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("libc.so.6 has no BIO_clear_flags"), std::string::npos);
}

TEST(OpenSslLoader, LoadsTheSystemOpenSslOnce) {
  ASSERT_TRUE(load_openssl());
  EXPECT_NE(SSL_new, nullptr);
  EXPECT_NE(TLS_client_method, nullptr);
  EXPECT_NE(ERR_get_error, nullptr);
  EXPECT_TRUE(load_openssl());
}

}  // namespace
}  // namespace rlock::redis
