// Fuzz target: netstrings and lock-name escaping (src/lock/keys.*). Decoded
// fields encode back to text that decodes to the same fields; escaping a name
// is one-to-one and keeps braces out of the hash tag.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lock/keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace lk = rlock::lock;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto fields = lk::parse_netstrings(text)) {
    auto again = lk::parse_netstrings(lk::netstrings(*fields));
    if (!again || *again != *fields) std::abort();
  }
  auto escaped = lk::escape_name(text);
  if (escaped.find_first_of("{}") != std::string::npos) std::abort();
  auto back = lk::unescape_name(escaped);
  if (!back || *back != text) std::abort();
  (void)lk::unescape_name(text);
  if (lk::validate_name(text)) {
    auto keys = lk::lock_keys("rlock:", text);
    // keys[6] is the meta key that `list` finds by SCAN.
    auto name = lk::name_of_meta_key("rlock:", keys.at(6));
    if (!name || *name != text) std::abort();
  }
  (void)lk::name_of_meta_key("rlock:", text);
  return 0;
}
