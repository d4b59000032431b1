#include "util/token.h"

#include <fmt/format.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

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

std::string short_id(std::string_view token) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return to_hex(digest, 4);
}

bool looks_like_token(std::string_view text) {
  if (text.size() != 32) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace rlock
