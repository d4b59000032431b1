// Fuzz target: the duration parser. Any text either parses or is a usage
// error; a parsed duration is never negative, and format_duration writes it
// so that parse_duration reads back the same value below a minute, and the
// whole seconds of it above (status shows ages as 1m5s, not 1m5s250ms).
#include "util/duration.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = rlock::parse_duration(text);
  if (!d) {
    if (d.error().code != rlock::Error::Code::usage) std::abort();
    return 0;
  }
  if (d->count() < 0) std::abort();
  auto again = rlock::parse_duration(rlock::format_duration(*d));
  if (!again) std::abort();
  auto expected = *d < rlock::Millis(60'000) ? *d : *d - *d % rlock::Millis(1000);
  if (*again != expected) std::abort();
  return 0;
}
