#include "util/token.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "util/sha1.h"

namespace rlock {

namespace {
std::string to_hex(const unsigned char* data, size_t size) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += k_digits[data[i] >> 4];
    out += k_digits[data[i] & 0xf];
  }
  return out;
}
}  // namespace

Result<std::string> new_token() {
  std::array<unsigned char, 16> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Error::Code::internal, fmt::format("getrandom: {}", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return to_hex(bytes.data(), bytes.size());
}

// SHA-1 rather than SHA-256: Lua in Redis offers only redis.sha1hex, and the
// script must compute the hash itself. For this purpose SHA-1 is sound: a
// token is 128 random bits, so finding one from its hash is a preimage
// search over 2^128 candidates, which SHA-1's known weakness (collisions,
// where the attacker picks both inputs) does not shorten.
std::string token_hash(std::string_view token) {
  return sha1_hex(token);
}

std::string short_id(std::string_view token) {
  return token_hash(token).substr(0, 8);
}

bool looks_like_token(std::string_view text) {
  if (text.size() != 32) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace rlock
