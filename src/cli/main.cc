// The `aotcache` program: manage and inspect a cache directory. Turns Status into exit codes; nothing else does.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/help.h"

#ifndef AOTCACHE_VERSION
#define AOTCACHE_VERSION "unknown"
#endif

namespace {

using aotcache::cli::Invocation;

// The value of an environment variable, "" when unset. The CLI's main is the only reader of the environment.
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool is_help(const std::string& a) {
  return a == "--help" || a == "-h";
}

// `aotcache run [--dir DIR] [-h|--help] [--] COMMAND...`: the process tree of COMMAND routes torch.compile's default
// backend through aotcache (python/aotcache/startup.py reads AOTCACHE_ENABLE at interpreter start, through
// aotcache-enable.pth). run's own options come before COMMAND; `--` ends them, the first other word starts COMMAND.
// Replaces this process, so COMMAND's exit status and signals are the caller's.
int exec_run(std::string dir, int argc, char** argv, int first) {
  for (; first < argc; ++first) {
    const std::string a = argv[first];
    if (a == "--") {
      ++first;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (is_help(a)) {
      std::cout << aotcache::cli::command_usage("run");
      return aotcache::cli::k_exit_ok;
    }
    if (a == "--dir" && first + 1 < argc) {
      dir = argv[++first];
    } else if (a.rfind("--dir=", 0) == 0) {
      dir = a.substr(6);
    } else {
      std::cerr << "aotcache run: " << (a == "--dir" ? "--dir needs a directory" : "unknown option " + a)
                << " (a command that starts with '-' goes after --)\n"
                << aotcache::cli::usage_line("run");
      return aotcache::cli::k_exit_usage;
    }
  }
  if (first >= argc) {
    std::cerr << "aotcache run: a command to run is needed (aotcache run -- python train.py)\n"
              << aotcache::cli::usage_line("run");
    return aotcache::cli::k_exit_usage;
  }
  if (setenv("AOTCACHE_ENABLE", "1", 1) != 0 || (!dir.empty() && setenv("AOTCACHE_DIR", dir.c_str(), 1) != 0)) {
    std::cerr << "aotcache run: cannot set the environment: " << std::strerror(errno) << "\n";
    return aotcache::cli::k_exit_failure;
  }
  execvp(argv[first], argv + first);
  const int err = errno;
  std::cerr << "aotcache run: cannot run " << argv[first] << ": " << std::strerror(err) << "\n";
  return err == ENOENT ? 127 : 126;  // as a shell reports a command not found / not executable
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<std::string> rest;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    if (is_help(a)) {  // before the command: the overview; after it: the command's own help
      if (rest.empty()) {
        std::cout << aotcache::cli::program_usage();
      } else if (aotcache::cli::find_command_help(rest[0]) == nullptr) {
        std::cerr << "aotcache: unknown command '" << rest[0] << "'\n" << aotcache::cli::program_usage();
        return aotcache::cli::k_exit_usage;
      } else {
        std::cout << aotcache::cli::command_usage(rest[0]);
      }
      return aotcache::cli::k_exit_ok;
    }
    if (a == "--version") {
      std::cout << "aotcache " << AOTCACHE_VERSION << "\n";
      return aotcache::cli::k_exit_ok;
    }
    if (a == "--dir") {  // a global option, before or after the command
      if (k + 1 >= argc) {
        std::cerr << "aotcache: --dir needs a directory\n" << aotcache::cli::program_usage();
        return aotcache::cli::k_exit_usage;
      }
      dir = argv[++k];
      continue;
    }
    if (a.rfind("--dir=", 0) == 0) {
      dir = a.substr(6);
      continue;
    }
    if (rest.empty() && a == "run") return exec_run(dir, argc, argv, k + 1);  // the rest is run's and the command's
    if (rest.empty() && a == "help") {                                        // `aotcache help [COMMAND]`
      if (k + 1 >= argc) {
        std::cout << aotcache::cli::program_usage();
        return aotcache::cli::k_exit_ok;
      }
      const std::string name = argv[k + 1];
      if (aotcache::cli::find_command_help(name) == nullptr) {
        std::cerr << "aotcache: unknown command '" << name << "'\n" << aotcache::cli::program_usage();
        return aotcache::cli::k_exit_usage;
      }
      std::cout << aotcache::cli::command_usage(name);
      return aotcache::cli::k_exit_ok;
    }
    rest.push_back(a);
  }
  if (rest.empty()) {
    std::cerr << aotcache::cli::program_usage();
    return aotcache::cli::k_exit_usage;
  }
  static const std::map<std::string, int (*)(const Invocation&)> k_commands = {
      {"stats", aotcache::cli::run_stats},   {"ls", aotcache::cli::run_ls},
      {"show", aotcache::cli::run_show},     {"rm", aotcache::cli::run_rm},
      {"clear", aotcache::cli::run_clear},   {"explain", aotcache::cli::run_explain},
      {"prune", aotcache::cli::run_prune},   {"verify", aotcache::cli::run_verify},
      {"export", aotcache::cli::run_export}, {"import", aotcache::cli::run_import},
  };
  auto cmd = k_commands.find(rest[0]);
  if (cmd == k_commands.end()) {
    std::cerr << "aotcache: unknown command '" << rest[0] << "'\n" << aotcache::cli::program_usage();
    return aotcache::cli::k_exit_usage;
  }
  if (dir.empty()) dir = aotcache::default_cache_dir(env("AOTCACHE_DIR"), env("XDG_CACHE_HOME"), env("HOME"));
  // The CLI is an edge: the store's options come from the environment here, as the Python settings build them for
  // the backend (python/aotcache/settings.py).
  aotcache::StoreOptions options;
  if (std::string m = env("AOTCACHE_MAX_SIZE"); !m.empty()) {
    auto parsed = aotcache::parse_size(m);
    if (!parsed.ok()) {
      std::cerr << "aotcache: AOTCACHE_MAX_SIZE: " << parsed.status().message() << "\n";
      return aotcache::cli::k_exit_usage;
    }
    options.max_size = *parsed;
  }
  if (std::string p = env("AOTCACHE_EVICTION"); !p.empty()) {
    auto policy = aotcache::parse_eviction_policy(p);
    if (!policy.ok()) {
      std::cerr << "aotcache: AOTCACHE_EVICTION: " << policy.status().message() << "\n";
      return aotcache::cli::k_exit_usage;
    }
    options.eviction = *policy;
  }
  // Fail closed: a malformed key must not silently turn verification off.
  auto keys = aotcache::make_signing_keys(env("AOTCACHE_SIGNING_KEY"), {env("AOTCACHE_SIGNING_KEYS_ACCEPTED")});
  if (!keys.ok()) {
    std::cerr << "aotcache: AOTCACHE_SIGNING_KEY / AOTCACHE_SIGNING_KEYS_ACCEPTED: " << keys.status().message() << "\n";
    return aotcache::cli::k_exit_usage;
  }
  options.signing = std::move(*keys);
  // Only import writes into a directory that is not there yet: inspecting or managing a mistyped path must say so,
  // not create an empty cache there. After the options: a malformed one is a usage error wherever DIR points.
  if (rest[0] != "import") {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::cerr << "aotcache: no cache directory at " << dir << "\n";
      return aotcache::cli::k_exit_failure;
    }
  }
  auto store = aotcache::LocalStore::open(dir, options);
  if (!store.ok()) {
    std::cerr << "aotcache: cannot open cache directory " << dir << ": " << store.status().to_string() << "\n";
    return aotcache::cli::k_exit_failure;
  }
  Invocation inv{store->get(), std::vector<std::string>(rest.begin() + 1, rest.end()), &std::cout, &std::cerr};
  return cmd->second(inv);
}
