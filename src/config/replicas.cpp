#include "config/replicas.h"

#include <fmt/format.h>

#include "util/number.h"

namespace rlock::config {

Result<ReplicaPolicy> parse_replicas(std::string_view text) {
  if (text == "all") return ReplicaPolicy{};
  auto count = parse_integer(text, 0, k_max_replicas);
  if (!count)
    return fail(Error::Code::usage,
                fmt::format("wants all or a number of replicas from 0 to {}, not {}",
                            k_max_replicas, quote_input(text)));
  return ReplicaPolicy{static_cast<int>(*count)};
}

}  // namespace rlock::config
