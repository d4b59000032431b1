#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "cli/context.h"
#include "lock/keys.h"
#include "output/render.h"
#include "util/process.h"

namespace rlock::cli {

Action register_release(CLI::App& command, Context& context, const Mentioned& /*mentioned*/) {
  auto* sub = &command;
  struct Options {
    std::string name;
    TokenOptions token;
    std::optional<std::string> holder;
    bool force = false;
  };
  auto o = std::make_shared<Options>();
  add_name_option(*sub, o->name);
  auto [token, token_file] = add_token_options(*sub, o->token);
  auto* force = sub->add_flag("--force", o->force, "Evict the holder(s) whatever their token");
  sub->add_option("--holder", o->holder, "With --force: evict only the holder with this id")
      ->needs(force);
  token->excludes(force);
  token_file->excludes(force);
  return [&context, o]() -> int {
    if (auto ok = lock::validate_name(o->name); !ok) return report(ok.error());
    // An empty id (an unset variable in a script) must not widen to every
    // holder, which is what --force alone means.
    if (o->holder && o->holder->empty())
      return report(Error{Error::Code::usage,
                          "--holder: the id is empty ('rlock status NAME' shows each holder's id; "
                          "--force without --holder evicts every holder)"});
    // Ids are shown in lower-case hex; one copied in upper case is the same.
    if (o->holder)
      std::transform(o->holder->begin(), o->holder->end(), o->holder->begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    auto token = o->token.read(context);
    if (!token) return report(token.error());
    if (!*token && !o->force)
      return report(
          Error{Error::Code::usage, "release needs --token TOKEN, --token-file FILE or --force"});
    auto client = context.client();
    if (!client) return report(client.error());
    if (*token) {
      auto released = client->release_confirmed(o->name, **token);
      if (!released) return report(released.error());
      if (auto printed = output::print_released(o->name, context.global.json); !printed)
        return report(printed.error());
      return 0;
    }
    // The audit record names the operator: user@host, this shell.
    pid_t caller = getppid();
    auto by = lock::local_identity(caller, context.show_command()
                                               ? process_command(caller, context.secrets())
                                               : process_name(caller));
    auto evicted = client->force_release(o->name, o->holder.value_or(""), by);
    if (!evicted) {
      Error error = evicted.error();
      // Unanswered is not undone: the request may still reach the server.
      // (A server that answered, e.g. at maxclients, refused it: not that.)
      if (error.code == Error::Code::unreachable && error.server == redis::ServerError::none)
        error.message +=
            "; the forced release may still be carried out when the request "
            "reaches the server: check with status before forcing again";
      return report(error);
    }
    if (auto printed = output::print_forced(o->name, *evicted, context.global.json); !printed)
      return report(printed.error());
    // Exit 1 with one error line, as a release whose token holds nothing.
    if (evicted->empty())
      return report(Error{Error::Code::not_owner,
                          o->holder
                              ? fmt::format("lock '{}' has no holder with id {}; nothing released",
                                            o->name, *o->holder)
                              : fmt::format("lock '{}' was not held; nothing released", o->name)});
    return 0;
  };
}

}  // namespace rlock::cli
