#include "util/error.h"

#include <cerrno>

namespace rlock {

bool out_of_descriptors(int err) {
  return err == EMFILE || err == ENFILE;
}

const char* descriptor_limit_hint(int err) {
  return out_of_descriptors(err) ? " (a local limit: ulimit -n)" : "";
}

ExitStatus exit_status(Error::Code code) {
  switch (code) {
    case Error::Code::usage:
      return ExitStatus::usage;
    case Error::Code::config:
      return ExitStatus::config;
    case Error::Code::unreachable:
      return ExitStatus::unavailable;
    case Error::Code::auth:
      return ExitStatus::auth;
    case Error::Code::server:
    case Error::Code::protocol:
      return ExitStatus::server;
    case Error::Code::busy:
      return ExitStatus::busy;
    case Error::Code::not_owner:
      return ExitStatus::refused;
    // An interrupted wait ends like a command killed by the signal; callers
    // that know the signal compute 128+N themselves.
    case Error::Code::interrupted:
      return ExitStatus::busy;
    case Error::Code::internal:
      return ExitStatus::internal;
  }
  return ExitStatus::internal;
}

std::string_view without_script_location(std::string_view message) {
  const size_t at = message.rfind(" script: ");
  if (at == std::string_view::npos ||
      message.find(", on @user_script:", at) == std::string_view::npos)
    return message;
  return message.substr(0, at);
}

}  // namespace rlock
