#include "util/trust.h"

#include <fmt/format.h>
#include <unistd.h>

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

}  // namespace rlock
