// The ssm program: parses the command line and runs one sub-command. Every
// failure reaches the user as one line "ssm: error: ..." on stderr, with exit
// code 2 when the command line is wrong and 1 when the run failed.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "cli/commands.h"
#include "cli/help_format.h"
#include "cli/parse_errors.h"
#include "cli/version.h"
#include "ssm/core/log.h"

namespace {

void print_error(const std::string& message) { std::fprintf(stderr, "ssm: error: %s\n", message.c_str()); }

void print_log(ssm::LogLevel level, const std::string& message) {
  static const char* const kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "ssm: %s: %s\n", kNames[static_cast<int>(level)], message.c_str());
}

// What a command printed must have reached standard output: a full disk or
// a closed descriptor is a failed run, not a silent success.
int check_stdout(int code) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return code;
  const int err = errno;
  print_error(std::string("cannot write to standard output") + (err != 0 ? ": " : "") +
              (err != 0 ? std::strerror(err) : ""));
  return code == 0 ? ssm::cli::kExitFailure : code;
}

// Every app keeps what it does not know as extras, so that an unknown option
// is reported as such before the value it swallowed fails a check.
void allow_extras_everywhere(CLI::App& app) {
  app.allow_extras();
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) allow_extras_everywhere(*sub);
}

void configure(CLI::App& app, ssm::cli::Action& action) {
  app.formatter(ssm::cli::make_help_formatter());
  // One command per run: after it, a word like "generate" is an argument
  // (ssm help generate), not a second command.
  app.require_subcommand(0, 1);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", std::function<std::string()>(ssm::cli::version_text),
                       "print the version, compiler, CPU targets and BLAS, and exit");
  app.footer(
      "'ssm help COMMAND' (or 'ssm COMMAND --help') lists a command's options.\n"
      "Exit status: 0 done, 1 the run failed, 2 the command line is wrong, 130 interrupted (Ctrl-C).");
  ssm::cli::add_registered_commands(app, action);
  allow_extras_everywhere(app);
}

}  // namespace

int main(int argc, char** argv) {
  ssm::set_log_sink(print_log);
  CLI::App app{"ssm: run, fine-tune and keep the state of state-space language models", "ssm"};
  ssm::cli::Action action;
  configure(app, action);
  try {
    // An unknown option or command explains any error that follows from it.
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
      if (const auto left = ssm::cli::leftover_arguments_message(app)) throw ssm::cli::UsageError(*left);
      throw ssm::cli::UsageError(ssm::cli::parse_error_message(app, e));
    } catch (const ssm::cli::UsageError&) {
      if (const auto left = ssm::cli::leftover_arguments_message(app)) throw ssm::cli::UsageError(*left);
      throw;
    }
    if (const auto left = ssm::cli::leftover_arguments_message(app)) throw ssm::cli::UsageError(*left);
    if (!action) {
      std::fputs(app.help().c_str(), stderr);
      throw ssm::cli::UsageError("no command given");
    }
    return check_stdout(action());
  } catch (const ssm::cli::UsageError& e) {
    print_error(e.what());
    return ssm::cli::kExitUsage;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return ssm::cli::kExitFailure;
  } catch (const std::exception& e) {
    print_error(e.what());
    return ssm::cli::kExitFailure;
  }
}
