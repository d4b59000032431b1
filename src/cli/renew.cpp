#include "cli/context.h"
#include "lock/keys.h"
#include "output/render.h"

namespace rlock::cli {

Action register_renew(CLI::App& command, Context& context, const Mentioned& /*mentioned*/) {
  auto* sub = &command;
  struct Options {
    std::string name;
    TokenOptions token;
    std::optional<std::string> ttl;
  };
  auto o = std::make_shared<Options>();
  add_name_option(*sub, o->name);
  add_token_options(*sub, o->token);
  sub->add_option("-t,--ttl", o->ttl,
                  "New lease length from now (default: the TTL it was acquired with)");
  return [&context, o]() -> int {
    if (auto ok = lock::validate_name(o->name); !ok) return report(ok.error());
    // 0 asks the script for the lease the lock was acquired with.
    auto ttl = parse_duration(o->ttl.value_or("0"));
    if (!ttl) return report(Error{Error::Code::usage, "--ttl: " + ttl.error().message});
    if (o->ttl && *ttl < Millis(100))
      return report(Error{Error::Code::usage, "--ttl must be at least 100ms"});
    auto token = o->token.read(context);
    if (!token) return report(token.error());
    if (!*token)
      return report(Error{Error::Code::usage, "renew needs --token TOKEN or --token-file FILE"});
    auto client = context.client();
    if (!client) return report(client.error());
    auto renewed =
        client->renew(o->name, **token, *ttl, Clock::now() + client->backend().command_timeout());
    if (!renewed) return report(renewed.error());
    if (auto printed = output::print_renewed(o->name, *renewed, context.global.json); !printed)
      return report(printed.error());
    return 0;
  };
}

}  // namespace rlock::cli
