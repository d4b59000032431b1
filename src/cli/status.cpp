#include "cli/context.h"
#include "lock/keys.h"
#include "output/render.h"

namespace rlock::cli {

Action register_status(CLI::App& command, Context& context, const Mentioned& /*mentioned*/) {
  auto* sub = &command;
  // Listed for --help only: split_command_line takes the names out of argv
  // (CLI11 would read `[a,b]` as two names) and leaves them in operands.
  auto help_only = std::make_shared<std::vector<std::string>>();
  sub->add_option("name", *help_only, "Lock names (default: every lock under the prefix)");
  auto ttl_text = std::make_shared<std::optional<std::string>>();
  sub->add_option("-t,--ttl", *ttl_text,
                  "Quorum: the TTL the locks are taken with; a member up for less cannot "
                  "vouch that a lock is free (default 30s)");
  return [&context, help_only, ttl_text]() -> int {
    output::end_quietly_on_broken_pipe();
    const std::vector<std::string>* names = &context.operands;
    for (const auto& name : *names)
      if (auto ok = lock::validate_name(name); !ok) return report(ok.error());
    auto ttl = parse_duration(ttl_text->value_or("30s"));
    if (!ttl) return report(Error{Error::Code::usage, "--ttl: " + ttl.error().message});
    if (*ttl < Millis(100))
      return report(Error{Error::Code::usage, "--ttl must be at least 100ms"});
    auto client = context.client();
    if (!client) return report(client.error());
    // A replica cut off from its master may show a held lock as free: said
    // once, after what it showed.
    const auto warn_if_stale = [&context, &client] {
      for (const auto& warning : client->backend().server_warnings())
        context.warn("warning: " + warning);
    };
    if (names->empty()) {
      // A Cluster shard out of reach: the operator still sees what the
      // others hold, one line per shard left out says the listing is
      // incomplete, and the exit status too (never 0 for a partial list).
      std::vector<Error> gaps;
      auto views = client->list([&gaps](Error why) { gaps.push_back(std::move(why)); }, *ttl);
      if (!views) return report(views.error());
      std::vector<std::string> unlisted;
      unlisted.reserve(gaps.size());
      for (const auto& gap : gaps) unlisted.push_back(gap.message);
      if (auto printed = output::print_list(*views, context.global.json, unlisted); !printed)
        return report(printed.error());
      warn_if_stale();
      int status = 0;
      for (const auto& gap : gaps) {
        const int code = report(gap);
        if (status == 0 || gap.code == Error::Code::unreachable) status = code;
      }
      return status;
    }
    // Exit 0 only if every named lock is held (like `test`), 1 otherwise.
    // Of several names, one whose keys the server refuses to read as a
    // lock (a foreign key at its name: a server error) is broken, as in a
    // listing: the others are still shown, and the exit status is its 76.
    bool all_held = true;
    std::vector<lock::LockView> views;
    std::vector<Error> broken;
    for (const auto& name : *names) {
      auto view = client->status(name, *ttl);
      if (!view && (names->size() == 1 || view.error().code != Error::Code::server))
        return report(view.error());
      if (!view) {
        lock::LockView unreadable;
        unreadable.name = name;
        unreadable.problem = view.error().message;
        views.push_back(std::move(unreadable));
        broken.push_back(view.error());
        all_held = false;
        continue;
      }
      all_held = all_held && !view->holders.empty();
      views.push_back(std::move(*view));
    }
    // --json prints one document: the lock itself, or {"locks": [...],
    // "broken": [...]}.
    std::size_t next_broken = 0;
    if (context.global.json && views.size() > 1) {
      if (auto printed = output::print_list(views, true); !printed) return report(printed.error());
    } else {
      for (const auto& view : views) {
        // A broken lock's line on stderr, in its place among the others.
        if (!view.problem.empty()) {
          (void)report(broken[next_broken++]);
          continue;
        }
        if (auto printed = output::print_status(view, context.global.json); !printed)
          return report(printed.error());
      }
    }
    // (With --json, the broken locks' lines follow the document.)
    for (; next_broken < broken.size(); ++next_broken) (void)report(broken[next_broken]);
    warn_if_stale();
    if (!broken.empty()) return static_cast<int>(exit_status(broken.front().code));
    return all_held ? 0 : static_cast<int>(ExitStatus::refused);
  };
}

}  // namespace rlock::cli
