#pragma once
/// Files that decide whom rlock trusts (its config, password and token
/// files, the CA certificates it verifies servers with, its client key): a
/// user who can change one can steal the password or make rlock talk to
/// their own server, so such a file must be this user's or root's, and
/// nobody else's to write.

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

/// An error (Code::config, exit 78) naming `what` and `path` when the file
/// or directory `st` describes is owned by another user (not root) or
/// writable by its group or others; nullopt when it is safe to trust.
std::optional<Error> untrusted(const struct stat& st, std::string_view what, std::string_view path);

/// The files that decide whom rlock trusts over TLS, checked before any
/// connection: with `verify`, the CA file and directory (or, when neither
/// is given, those OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR name) and the
/// hashed names it looks up in a directory (`1a2b3c4d.0`); the client
/// certificate and key. Each is refused as untrusted() says (78), or, when
/// an option names one that is not there, not of its kind or unreadable,
/// is a usage error (64) worded as loading it would be.
std::optional<Error> check_tls_files(const std::string& cacert, const std::string& cacertdir,
                                     const std::string& cert, const std::string& key, bool verify);

}  // namespace rlock
