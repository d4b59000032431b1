#include "cli/context.h"

namespace rlock::cli {

Action register_run(CLI::App& app, Context& context) {
  auto* sub = app.add_subcommand("run", "Run a command while holding a lock");
  auto options = std::make_shared<LockOptions>();
  auto command = std::make_shared<std::vector<std::string>>();
  add_name_option(*sub, options->name);
  add_lock_options(*sub, *options);
  sub->add_option("command", *command, "The command and its arguments");
  return [&context, options]() -> int {
    (void)context;
    return report(Error{Error::Code::internal, "run: not built yet"});
  };
}

}  // namespace rlock::cli
