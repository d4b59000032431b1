// Fuzz target: the server URL parser. Any text either parses or is a usage
// error; a parsed URL's redacted form never shows the password and parses
// again to the same place.
#include "redis/url.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto url = rlock::redis::parse_url(text);
  if (!url) {
    if (url.error().code != rlock::Error::Code::usage) std::abort();
    return 0;
  }
  if (url->port < 0 || url->port > 65535 || url->db < 0) std::abort();
  // A tcp or tls URL has its first host in host and port; only Sentinel
  // URLs have a master name, and they always have one.
  if (url->scheme != rlock::redis::Url::Scheme::unix_socket &&
      (url->hosts.empty() || url->hosts.front().host != url->host ||
       url->hosts.front().port != url->port))
    std::abort();
  if (url->sentinel == url->master_name.empty()) std::abort();
  auto shown = url->redacted();
  auto again = rlock::redis::parse_url(shown);
  if (again &&
      (again->scheme != url->scheme || again->host != url->host || again->port != url->port ||
       again->db != url->db || again->path != url->path || again->hosts != url->hosts ||
       again->sentinel != url->sentinel || again->master_name != url->master_name))
    std::abort();
  return 0;
}
