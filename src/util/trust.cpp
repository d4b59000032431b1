#include "util/trust.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace rlock {

std::optional<Error> untrusted(const struct stat& st, std::string_view what,
                               std::string_view path) {
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return Error{Error::Code::config,
                 fmt::format("refusing {} '{}': it is owned by another user (uid {}), who could "
                             "change it; make it yours or root's (chown)",
                             what, path, st.st_uid)};
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error{Error::Code::config,
                 fmt::format("refusing {} '{}': others can write it; fix: chmod go-w '{}'", what,
                             path, path)};
  return std::nullopt;
}

namespace {

/// One file or directory the TLS options name: refused as untrusted() says
/// (78), then, as loading it would say, when it is not there, not of its
/// kind or unreadable (64); a `required` one only (what OpenSSL's own
/// variables name may be missing: OpenSSL then finds nothing there). In a
/// directory, the hashed names OpenSSL looks up (`1a2b3c4d.0`) too.
std::optional<Error> check_path(const std::string& path, std::string_view what,
                                std::string_view loaded_as, bool directory, bool required) {
  if (path.empty()) return std::nullopt;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (!required) return std::nullopt;
    return Error{Error::Code::usage,
                 fmt::format("cannot load {} {}: {}", loaded_as, path, std::strerror(errno))};
  }
  if (auto refused = untrusted(st, what, path)) return refused;
  const char* why = directory != S_ISDIR(st.st_mode)
                        ? (directory ? "not a directory" : "it is a directory")
                    : ::access(path.c_str(), R_OK) != 0 ? std::strerror(errno)
                                                        : nullptr;
  if (why) {
    if (!required) return std::nullopt;
    return Error{Error::Code::usage, fmt::format("cannot load {} {}: {}", loaded_as, path, why)};
  }
  if (!directory) return std::nullopt;
  // Without exceptions: a directory that cannot be listed is reported when
  // OpenSSL looks into it.
  std::error_code error;
  for (std::filesystem::directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    const bool hashed = name.size() >= 10 && name[8] == '.' &&
                        std::all_of(name.begin(), name.begin() + 8,
                                    [](unsigned char c) { return std::isxdigit(c) != 0; });
    struct stat entry {};
    if (!hashed || ::stat(it->path().c_str(), &entry) != 0) continue;
    if (auto refused = untrusted(entry, "CA certificate", it->path().string())) return refused;
  }
  return std::nullopt;
}

constexpr std::string_view k_ca = "CA certificates from";

}  // namespace

std::optional<Error> check_tls_files(const std::string& cacert, const std::string& cacertdir,
                                     const std::string& cert, const std::string& key, bool verify) {
  if (verify && cacert.empty() && cacertdir.empty()) {
    // OpenSSL's own defaults, which these variables move.
    if (const char* file = std::getenv("SSL_CERT_FILE"); file && *file)
      if (auto refused =
              check_path(file, "CA certificate file (SSL_CERT_FILE)", k_ca, false, false))
        return refused;
    if (const char* dirs = std::getenv("SSL_CERT_DIR"); dirs && *dirs) {
      const std::string_view list = dirs;
      for (std::size_t from = 0; from <= list.size();) {
        const std::size_t colon = std::min(list.find(':', from), list.size());
        if (colon > from)
          if (auto refused = check_path(std::string(list.substr(from, colon - from)),
                                        "CA certificate directory", k_ca, true, false))
            return refused;
        from = colon + 1;
      }
    }
  } else if (verify) {
    if (auto refused = check_path(cacert, "CA certificate file", k_ca, false, true)) return refused;
    if (auto refused = check_path(cacertdir, "CA certificate directory", k_ca, true, true))
      return refused;
  }
  if (auto refused =
          check_path(cert, "TLS client certificate", "TLS client certificate", false, true))
    return refused;
  return check_path(key, "TLS client key", "TLS client key", false, true);
}

}  // namespace rlock
