#include "util/sha1.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace rlock {
namespace {

// SHA-1 as FIPS 180-4 defines it, rather than OpenSSL's: every rlock command
// hashes (the lock script's SHA for EVALSHA), and OpenSSL is loaded only for
// TLS (redis/openssl_loader.h). The inputs are a script and a token, so
// speed does not matter; a digest used to name a script or store a token
// hash is not a signature, so SHA-1's collision weakness does not either.
class Sha1 {
 public:
  void update(std::string_view bytes) {
    for (const char c : bytes) {
      m_block[m_used++] = static_cast<std::uint8_t>(c);
      if (m_used == m_block.size()) compress();
    }
    m_length += bytes.size();
  }

  std::array<std::uint8_t, 20> finish() {
    const std::uint64_t bits = m_length * 8;
    m_block[m_used++] = 0x80;
    if (m_used > 56) {
      while (m_used < 64) m_block[m_used++] = 0;
      compress();
    }
    while (m_used < 56) m_block[m_used++] = 0;
    for (int i = 7; i >= 0; --i) m_block[m_used++] = static_cast<std::uint8_t>(bits >> (8 * i));
    compress();
    std::array<std::uint8_t, 20> digest{};
    for (std::size_t i = 0; i < digest.size(); ++i) {
      digest[i] = static_cast<std::uint8_t>(m_state[i / 4] >> (24 - 8 * (i % 4)));
    }
    return digest;
  }

 private:
  void compress() {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t t = 0; t < 16; ++t) {
      w[t] = std::uint32_t{m_block[4 * t]} << 24 | std::uint32_t{m_block[4 * t + 1]} << 16 |
             std::uint32_t{m_block[4 * t + 2]} << 8 | std::uint32_t{m_block[4 * t + 3]};
    }
    for (std::size_t t = 16; t < 80; ++t) {
      w[t] = std::rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    }
    auto [a, b, c, d, e] = m_state;
    for (std::size_t t = 0; t < 80; ++t) {
      std::uint32_t f = 0;
      std::uint32_t k = 0;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const std::uint32_t next = std::rotl(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = std::rotl(b, 30);
      b = a;
      a = next;
    }
    m_state[0] += a;
    m_state[1] += b;
    m_state[2] += c;
    m_state[3] += d;
    m_state[4] += e;
    m_used = 0;
  }

  std::array<std::uint32_t, 5> m_state{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<std::uint8_t, 64> m_block{};
  std::size_t m_used = 0;
  std::uint64_t m_length = 0;
};

}  // namespace

std::string sha1_hex(std::string_view text) {
  Sha1 sha1;
  sha1.update(text);
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(40);
  for (const std::uint8_t byte : sha1.finish()) {
    hex += k_digits[byte >> 4];
    hex += k_digits[byte & 0xf];
  }
  return hex;
}

}  // namespace rlock
