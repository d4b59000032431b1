#include "util/sha1.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "output/text.h"

namespace rlock {
namespace {

// rlock's own SHA-1 and base64 replace OpenSSL's (loaded only for TLS), so
// they are checked against OpenSSL itself, linked into the tests only.
std::string openssl_sha1(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha1(), nullptr);
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += k_digits[digest[i] >> 4];
    hex += k_digits[digest[i] & 0xf];
  }
  return hex;
}

TEST(Sha1, KnownVectors) {
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1, MatchesOpenSslAcrossBlockBoundaries) {
  std::string text;
  for (int length = 0; length <= 200; ++length) {
    EXPECT_EQ(sha1_hex(text), openssl_sha1(text)) << "length " << length;
    text += static_cast<char>(length * 37 + 11);
  }
}

TEST(Base64, MatchesOpenSsl) {
  std::string bytes;
  for (int length = 0; length <= 20; ++length) {
    std::string expected(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(expected.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()),
                                  static_cast<int>(bytes.size()));
    expected.resize(static_cast<std::size_t>(n));
    EXPECT_EQ(output::base64(bytes), expected) << "length " << length;
    bytes += static_cast<char>(255 - length * 13);
  }
}

}  // namespace
}  // namespace rlock
