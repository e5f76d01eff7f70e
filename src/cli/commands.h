// The subcommands of the `aotcache` program, one file each. Each returns the process exit code.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "aotcache/status.h"
#include "aotcache/store.h"

namespace aotcache::cli {

constexpr int k_exit_ok = 0;
constexpr int k_exit_failure = 1;  // the operation failed (no such key, I/O error, corrupt entry)
constexpr int k_exit_usage = 2;    // bad arguments

struct Invocation {
  LocalStore* store;
  std::vector<std::string> args;  // after the subcommand name, options included
  std::ostream* out;
  std::ostream* err;

  bool flag(const std::string& name) const;     // "--json"
  std::vector<std::string> positional() const;  // arguments that are not options (nor values of `valued` options)
  // The value after `name` ("--sort size"); nullopt when absent.
  std::optional<std::string> option(const std::string& name) const;
  // Empty when every option is one of `flags` or `valued` (and each valued one has a value); else the message for
  // the first that is not.
  std::string bad_option(const std::vector<std::string>& flags, const std::vector<std::string>& valued) const;
};

// The exit code of a failed key resolution or operation: bad arguments (a malformed or ambiguous key) or failure.
int exit_code(const Status& s);

// A full key, or a unique prefix of one (at least 4 hex digits) that names exactly one entry.
Result<std::string> resolve_key(LocalStore& store, const std::string& key_or_prefix);

int run_stats(const Invocation& inv);
int run_ls(const Invocation& inv);
int run_show(const Invocation& inv);
int run_rm(const Invocation& inv);
int run_clear(const Invocation& inv);
int run_explain(const Invocation& inv);
int run_prune(const Invocation& inv);
int run_verify(const Invocation& inv);
int run_export(const Invocation& inv);
int run_import(const Invocation& inv);

}  // namespace aotcache::cli
