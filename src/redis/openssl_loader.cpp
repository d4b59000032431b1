#include "redis/openssl_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <iterator>
#include <string>

namespace rlock::redis {

// X-macros: their arguments are names, which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define RLOCK_OPENSSL_DEFINE(library, function) decltype(&::function) function = nullptr;
RLOCK_OPENSSL_FUNCTIONS(RLOCK_OPENSSL_DEFINE)
#undef RLOCK_OPENSSL_DEFINE
// NOLINTEND(bugprone-macro-parentheses)

namespace {

#define RLOCK_OPENSSL_NAME(library, function) #function,
constexpr const char* k_function_names[] = {RLOCK_OPENSSL_FUNCTIONS(RLOCK_OPENSSL_NAME)};
#undef RLOCK_OPENSSL_NAME
constexpr std::size_t k_function_count = std::size(k_function_names);

std::string dl_reason() {
  const char* reason = dlerror();
  return reason ? reason : "unknown error";
}

std::unexpected<Error> unavailable(std::string_view reason) {
  return fail(Error::Code::unreachable,
              fmt::format("TLS is unavailable: {} (rlock loads OpenSSL 3 for rediss:// URLs; "
                          "install libssl3)",
                          reason));
}

}  // namespace

namespace detail {

Result<void> load_openssl_from(std::string_view crypto_name, std::string_view ssl_name) {
  // Never closed: OpenSSL registers exit handlers and keeps global state.
  // libcrypto first, so that libssl's own dependency resolves to it.
  void* const crypto = dlopen(std::string(crypto_name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!crypto) return unavailable(dl_reason());
  void* const ssl = dlopen(std::string(ssl_name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!ssl) return unavailable(dl_reason());
  // Every function is looked up before any pointer is set: all or nothing.
  std::array<void*, k_function_count> found{};
  std::size_t next = 0;
  // NOLINTBEGIN(bugprone-macro-parentheses): X-macros, as above.
#define RLOCK_OPENSSL_FIND(library, function)                                   \
  found[next] = dlsym(library, #function);                                      \
  if (!found[next++]) {                                                         \
    return unavailable(fmt::format("{} has no {}", library##_name, #function)); \
  }
  RLOCK_OPENSSL_FUNCTIONS(RLOCK_OPENSSL_FIND)
#undef RLOCK_OPENSSL_FIND
  next = 0;
  // dlsym() returns an object pointer; POSIX guarantees it converts to the
  // function's pointer type.
#define RLOCK_OPENSSL_SET(library, function) \
  function = reinterpret_cast<decltype(function)>(found[next++]);
  RLOCK_OPENSSL_FUNCTIONS(RLOCK_OPENSSL_SET)
#undef RLOCK_OPENSSL_SET
  // NOLINTEND(bugprone-macro-parentheses)
  return {};
}

}  // namespace detail

Result<void> load_openssl() {
  // A function-local static: initialised once, thread-safe (the heartbeat's
  // connection may be the first TLS one of the process).
  static const Result<void> loaded = detail::load_openssl_from(k_libcrypto, k_libssl);
  return loaded;
}

}  // namespace rlock::redis
