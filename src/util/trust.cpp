#include "util/trust.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
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

std::optional<Error> check_path(const std::string& path, std::string_view what) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return untrusted(st, what, path);
}

/// A CA directory and the hashed names OpenSSL looks up in it.
std::optional<Error> check_ca_directory(const std::string& dir) {
  if (auto refused = check_path(dir, "CA certificate directory")) return refused;
  // Without exceptions: a directory that cannot be listed is reported when
  // OpenSSL looks into it.
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    const bool hashed = name.size() >= 10 && name[8] == '.' &&
                        std::all_of(name.begin(), name.begin() + 8,
                                    [](unsigned char c) { return std::isxdigit(c) != 0; });
    if (!hashed) continue;
    if (auto refused = check_path(it->path().string(), "CA certificate")) return refused;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Error> untrusted_tls_files(const std::string& cacert, const std::string& cacertdir,
                                         const std::string& cert, const std::string& key,
                                         bool verify) {
  if (verify && cacert.empty() && cacertdir.empty()) {
    // OpenSSL's own defaults, which these variables move.
    if (const char* file = std::getenv("SSL_CERT_FILE"); file && *file)
      if (auto refused = check_path(file, "CA certificate file (SSL_CERT_FILE)")) return refused;
    if (const char* dirs = std::getenv("SSL_CERT_DIR"); dirs && *dirs) {
      const std::string_view list = dirs;
      for (std::size_t from = 0; from <= list.size();) {
        const std::size_t colon = std::min(list.find(':', from), list.size());
        if (colon > from)
          if (auto refused = check_ca_directory(std::string(list.substr(from, colon - from))))
            return refused;
        from = colon + 1;
      }
    }
  } else if (verify) {
    if (auto refused = check_path(cacert, "CA certificate file")) return refused;
    if (!cacertdir.empty())
      if (auto refused = check_ca_directory(cacertdir)) return refused;
  }
  if (auto refused = check_path(cert, "TLS client certificate")) return refused;
  return check_path(key, "TLS client key");
}

}  // namespace rlock
