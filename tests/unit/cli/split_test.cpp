#include <gtest/gtest.h>

#include "cli/context.h"

namespace rlock::cli {
namespace {

using Words = std::vector<std::string>;

/// The real command set, as run_main registers it.
struct Commands {
  CLI::App app{"rlock", "rlock"};
  Context context;
  Commands() {
    app.add_option("-u,--url", context.global.layer.urls)->allow_extra_args(false);
    app.add_flag("-q,--quiet", context.global.quiet);
    register_commands(app, context, std::nullopt);
  }
  CommandLine split(Words args) {
    auto line = split_command_line(app, std::move(args));
    EXPECT_TRUE(line.has_value()) << line.error().message;
    return line.value_or(CommandLine{});
  }
};

TEST(SplitCommandLine, RunCommandWordsNeverReachCli11) {
  Commands c;
  auto line = c.split({"run", "n", "--", "printf", "[1, 2]", "[]", "--", "-l"});
  EXPECT_EQ(line.args, (Words{"run", "--", "n"}));
  EXPECT_EQ(line.operands, (Words{"printf", "[1, 2]", "[]", "--", "-l"}));
}

TEST(SplitCommandLine, RunCommandStartsAtTheSecondPositional) {
  Commands c;
  auto line = c.split({"-u", "redis://h", "run", "-t", "5s", "n", "-w", "1", "ls", "-l"});
  EXPECT_EQ(line.args, (Words{"-u", "redis://h", "run", "-t", "5s", "-w", "1", "--", "n"}));
  EXPECT_EQ(line.operands, (Words{"ls", "-l"}));
  auto dashed = c.split({"run", "--", "-x", "cmd"});
  EXPECT_EQ(dashed.args, (Words{"run", "--", "-x"}));
  EXPECT_EQ(dashed.operands, (Words{"cmd"}));
}

TEST(SplitCommandLine, AnEmptyValueAfterAnEqualsSignIsAWordOfItsOwn) {
  Commands c;
  auto line = c.split({"--url=", "acquire", "--owner=", "--shared", "n", "--ttl=5s"});
  EXPECT_EQ(line.args,
            (Words{"--url", "", "acquire", "--owner", "", "--shared", "--ttl=5s", "--", "n"}));
  // A flag with '=' is left to the check that says it takes no value, and
  // the command's words stay verbatim.
  auto run = c.split({"run", "n", "--owner=", "echo", "--owner="});
  EXPECT_EQ(run.args, (Words{"run", "--owner", "", "--", "n"}));
  EXPECT_EQ(run.operands, (Words{"echo", "--owner="}));
}

TEST(SplitCommandLine, StatusNamesAreOperandsVerbatim) {
  Commands c;
  auto line = c.split({"status", "[a,b]", "-u", "redis://h", "++", "--", "-x"});
  EXPECT_EQ(line.args, (Words{"status", "-u", "redis://h"}));
  EXPECT_EQ(line.operands, (Words{"[a,b]", "++", "-x"}));
}

TEST(SplitCommandLine, OtherNamesGoAfterADoubleDash) {
  Commands c;
  auto line = c.split({"acquire", "status", "-n"});
  EXPECT_EQ(line.args, (Words{"acquire", "-n", "--", "status"}));
  EXPECT_TRUE(line.operands.empty());
}

TEST(SplitCommandLine, UnknownCommandSuggestsTheClosest) {
  Commands c;
  auto typo = split_command_line(c.app, {"-q", "stauts", "x"});
  ASSERT_FALSE(typo.has_value());
  EXPECT_EQ(typo.error().code, Error::Code::usage);
  EXPECT_NE(typo.error().message.find("did you mean 'status'?"), std::string::npos);
  auto far = split_command_line(c.app, {"frobnicate"});
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error().message.find("did you mean"), std::string::npos);
}

TEST(SplitCommandLine, UnknownOptionIsNamedWithoutItsValueAndTheClosestSuggested) {
  Commands c;
  auto typo = split_command_line(c.app, {"acquire", "--tll", "5s", "x"});
  ASSERT_FALSE(typo.has_value());
  EXPECT_EQ(typo.error().code, Error::Code::usage);
  EXPECT_EQ(typo.error().message,
            "unknown option '--tll'; did you mean '--ttl'? (see 'rlock acquire --help')");
  // A prefix of one option and a typo of another: both, the command's own
  // first.
  auto both = split_command_line(c.app, {"acquire", "--tl", "5s", "x"});
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.error().message,
            "unknown option '--tl'; did you mean '--ttl' or '--tls'? (see 'rlock acquire --help')");
  // A global option the root was not given is still suggested.
  auto global = split_command_line(c.app, {"status", "--jsno"});
  ASSERT_FALSE(global.has_value());
  EXPECT_NE(global.error().message.find("did you mean '--json'?"), std::string::npos);
  auto valued = split_command_line(c.app, {"renew", "x", "--tokn=s3cret"});
  ASSERT_FALSE(valued.has_value());
  EXPECT_EQ(valued.error().message.find("s3cret"), std::string::npos);
  EXPECT_NE(valued.error().message.find("'--tokn'; did you mean '--token'?"), std::string::npos);
  auto secret = split_command_line(c.app, {"status", "-a", "s3cret"});
  ASSERT_FALSE(secret.has_value());
  EXPECT_TRUE(secret.error().message.starts_with("there is no -a option"))
      << secret.error().message;
  // Before the command word too, and in a cluster, never with the rest of
  // the word (the value that may follow an unknown letter).
  for (const Words& words : {Words{"--passwrd=s3cret", "status"}, Words{"-qa", "s3cret", "status"},
                             Words{"acquire", "x", "-qas3cret"}, Words{"acquire", "-nZs3cret", "x"},
                             Words{"--tokn=s3cret", "release", "x"}}) {
    auto refused = split_command_line(c.app, words);
    ASSERT_FALSE(refused.has_value()) << words[0];
    EXPECT_EQ(refused.error().message.find("s3cret"), std::string::npos) << refused.error().message;
  }
  EXPECT_NE(split_command_line(c.app, {"acquire", "-nZ", "x"}).error().message.find("'-Z'"),
            std::string::npos);
  // Another command's option, the options a prefix begins, one dash.
  EXPECT_NE(split_command_line(c.app, {"release", "x", "--ttl", "5s", "--force"})
                .error()
                .message.find("it is an option of run, acquire, renew and status, not of release"),
            std::string::npos);
  EXPECT_NE(split_command_line(c.app, {"acquire", "--con", "3", "x"})
                .error()
                .message.find("did you mean '--config', '--conflict-exit-code' or "
                              "'--connect-timeout'?"),
            std::string::npos);
  EXPECT_NE(split_command_line(c.app, {"acquire", "-json", "x"}).error().message.find("'--json'?"),
            std::string::npos);
  // A long option with one dash is not read as a cluster with a value
  // (-url URL was -u rl, and the URL became the command word, said back).
  for (const Words& words :
       {Words{"-url", "redis://:s3cret@h:1/0", "status"}, Words{"renew", "y", "-token", "s3cret"},
        Words{"status", "-quiet"}, Words{"status", "-xs3cret"}, Words{"-ps3cret", "status"},
        Words{"acquire", "x", "--quiet=s3cret"}, Words{"redis://:s3cret@h:1/0", "status"}}) {
    auto refused = split_command_line(c.app, words);
    ASSERT_FALSE(refused.has_value()) << words[0] << " " << words[1];
    EXPECT_EQ(refused.error().message.find("s3cret"), std::string::npos) << refused.error().message;
  }
  EXPECT_NE(split_command_line(c.app, {"status", "-quiet"}).error().message.find("'--quiet'?"),
            std::string::npos);
  // A command's option before the command word is said to go after it.
  EXPECT_NE(split_command_line(c.app, {"-n", "acquire", "x"})
                .error()
                .message.find("it is an option of run and acquire: give it after the command word"),
            std::string::npos);
  EXPECT_TRUE(split_command_line(c.app, {"acquire", "-t5s", "-w1s", "-nq", "x"}).has_value());
  // A value that starts with -a is a value; a line that asks for help gets it.
  EXPECT_TRUE(split_command_line(c.app, {"acquire", "--owner", "-abc", "x"}).has_value());
  EXPECT_TRUE(split_command_line(c.app, {"acquire", "--tll", "x", "--help"}).has_value());
  // Known options, clusters of them, and words after -- are not refused.
  EXPECT_TRUE(split_command_line(c.app, {"acquire", "-nq", "--ttl=5s", "x"}).has_value());
  EXPECT_TRUE(split_command_line(c.app, {"status", "--", "--tll"}).has_value());
  EXPECT_TRUE(split_command_line(c.app, {"run", "x", "--", "ls", "--bogus"}).has_value());
}

TEST(RegisterCommands, OnlyTheCommandThatRunsGetsItsOptions) {
  CLI::App app{"rlock", "rlock"};
  Context context;
  app.add_option("-u,--url", context.global.layer.urls)->allow_extra_args(false);
  const auto word = command_word(app, {"-u", "redis://h", "acquire", "-t", "5s", "n"});
  ASSERT_EQ(word, "acquire");
  const auto commands = register_commands(app, context, *word);
  ASSERT_EQ(commands.size(), 5U);
  for (const auto& [sub, action] : commands) {
    const bool chosen = sub->get_name() == "acquire";
    EXPECT_EQ(static_cast<bool>(action), chosen) << sub->get_name();
    EXPECT_EQ(sub->get_option_no_throw("-t") != nullptr, chosen) << sub->get_name();
    EXPECT_FALSE(sub->get_description().empty());
  }
}

TEST(RegisterCommands, OnlyTheOptionsTheLineNamesAreAdded) {
  CLI::App app{"rlock", "rlock"};
  Context context;
  const Words words{"acquire", "-nt5s", "--owner=me", "n"};
  const Mentioned mentioned(words);
  const auto commands = register_commands(app, context, "acquire", mentioned);
  ASSERT_EQ(commands.size(), 1U);
  const CLI::App& acquire = *commands.front().first;
  EXPECT_EQ(acquire.get_name(), "acquire");
  for (const char* named : {"-n", "-t", "-s", "--owner", "name"})
    EXPECT_NE(acquire.get_option_no_throw(named), nullptr) << named;
  for (const char* unnamed : {"-w", "-l", "-E"})
    EXPECT_EQ(acquire.get_option_no_throw(unnamed), nullptr) << unnamed;
  // Help lists every command and every option.
  CLI::App helped{"rlock", "rlock"};
  const Words help{"run", "-h"};
  const auto all = register_commands(helped, context, "run", Mentioned(help));
  ASSERT_EQ(all.size(), 5U);
  EXPECT_NE(all.front().first->get_option_no_throw("--max-hold"), nullptr);
  // A word that is no command keeps them all, for "did you mean".
  CLI::App typo{"rlock", "rlock"};
  EXPECT_EQ(register_commands(typo, context, "stauts", Mentioned(words)).size(), 5U);
}

TEST(RegisterCommands, TheCommandWordIsFoundAsSplitCommandLineFindsIt) {
  CLI::App app{"rlock", "rlock"};
  Context context;
  app.add_option("-u,--url", context.global.layer.urls)->allow_extra_args(false);
  app.add_flag("-q,--quiet", context.global.quiet);
  EXPECT_EQ(command_word(app, {"-q", "-u", "run", "status"}), "status");  // -u takes "run"
  EXPECT_EQ(command_word(app, {"--quiet", "run", "x"}), "run");
  EXPECT_EQ(command_word(app, {"--bogus", "run"}), std::nullopt);
  EXPECT_EQ(command_word(app, {"--", "run"}), std::nullopt);
  EXPECT_EQ(command_word(app, {"-q"}), std::nullopt);
}

}  // namespace
}  // namespace rlock::cli
