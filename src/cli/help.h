// What each subcommand of the `aotcache` program takes and does: the one place its usage text lives, for
// `aotcache --help`, `aotcache COMMAND --help` and the usage line of a bad invocation.
#pragma once

#include <string>
#include <vector>

namespace aotcache::cli {

struct CommandHelp {
  const char* name;
  const char* synopsis;     // the arguments after the name: "[--json] [--zero]"
  const char* summary;      // one line for the overview
  const char* description;  // the command's own --help, after its usage line
};

// Every subcommand, in the order the overview lists them.
const std::vector<CommandHelp>& command_help();
// nullptr when `name` is not a subcommand.
const CommandHelp* find_command_help(const std::string& name);
// "usage: aotcache NAME SYNOPSIS\n".
std::string usage_line(const std::string& name);
// The usage line and the description: what `aotcache NAME --help` prints.
std::string command_usage(const std::string& name);
// The program's overview: what `aotcache --help` prints.
std::string program_usage();

}  // namespace aotcache::cli
