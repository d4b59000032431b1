#include "util/sha1.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace rlock {

std::string sha1_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("SHA1 is not available from OpenSSL");
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(std::size_t{length} * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += k_digits[digest[i] >> 4];
    hex += k_digits[digest[i] & 0xf];
  }
  return hex;
}

}  // namespace rlock
