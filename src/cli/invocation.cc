// Argument helpers shared by the subcommands.
#include <algorithm>

#include "cli/commands.h"

namespace aotcache::cli {

bool Invocation::flag(const std::string& name) const {
  return std::find(args.begin(), args.end(), name) != args.end();
}

std::vector<std::string> Invocation::positional() const {
  static const std::vector<std::string> k_valued = {"--sort", "--max-size", "--older-than"};
  std::vector<std::string> result;
  for (size_t k = 0; k < args.size(); ++k) {
    if (std::find(k_valued.begin(), k_valued.end(), args[k]) != k_valued.end()) {
      ++k;
      continue;
    }
    if (args[k].rfind("--", 0) != 0) result.push_back(args[k]);
  }
  return result;
}

std::optional<std::string> Invocation::option(const std::string& name) const {
  for (size_t k = 0; k + 1 < args.size(); ++k) {
    if (args[k] == name) return args[k + 1];
  }
  return std::nullopt;
}

std::string Invocation::bad_option(const std::vector<std::string>& flags,
                                   const std::vector<std::string>& valued) const {
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (a.rfind("--", 0) != 0) continue;
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    if (std::find(valued.begin(), valued.end(), a) != valued.end()) {
      if (k + 1 >= args.size() || args[k + 1].rfind("--", 0) == 0) return a + " needs a value";
      ++k;
      continue;
    }
    return "unknown option " + a;
  }
  return "";
}

int exit_code(const Status& s) {
  if (s.ok()) return k_exit_ok;
  return s.code() == StatusCode::kInvalidArgument ? k_exit_usage : k_exit_failure;
}

Result<std::string> resolve_key(LocalStore& store, const std::string& key_or_prefix) {
  if (is_valid_key_hex(key_or_prefix)) return key_or_prefix;
  if (key_or_prefix.size() < 4 || key_or_prefix.size() > 64 ||
      key_or_prefix.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status::invalid_argument("'" + key_or_prefix + "' is not a key or a key prefix of at least 4 hex digits");
  }
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, store.list());
  std::string found;
  for (const auto& e : entries) {
    if (e.key_hex.rfind(key_or_prefix, 0) == 0) {
      if (!found.empty()) return Status::invalid_argument("key prefix '" + key_or_prefix + "' is ambiguous");
      found = e.key_hex;
    }
  }
  if (found.empty()) return Status::not_found("no entry with key " + key_or_prefix);
  return found;
}

}  // namespace aotcache::cli
