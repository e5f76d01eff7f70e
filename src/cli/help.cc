// The usage text of the `aotcache` program and of each subcommand.
#include "cli/help.h"

#include <algorithm>

namespace aotcache::cli {

const std::vector<CommandHelp>& command_help() {
  static const std::vector<CommandHelp> k_help = {
      {"stats", "[--json] [--zero]", "cumulative hits, misses, bypasses, errors; entry count and size",
       "The cache directory's statistics, summed over every process that used it: hits, misses, bypasses by reason,\n"
       "internal errors by phase, the frame cache's counters, seconds saved, bytes read and written; the number and\n"
       "size of the entries.\n"
       "  --json   as one JSON object\n"
       "  --zero   set the statistics to zero (entries stay)\n"},
      {"ls", "[--json] [--sort age|size|saved]", "list entries, newest first",
       "One line per entry: key, kind, size, last use, compile seconds it saves.\n"
       "  --json   as a JSON array\n"
       "  --sort   age (default: most recently used first), size (largest first) or saved (compile seconds it saves,\n"
       "           most first)\n"},
      {"show", "KEY [--json]", "an entry's header, manifest and metadata (KEY may be a unique prefix)",
       "An entry's header, its key's manifest (the digest of each component) and its metadata. KEY is a full key or a\n"
       "unique prefix of at least 4 hex digits.\n"
       "  --json   as one JSON object\n"},
      {"explain", "KEY_A KEY_B", "the key components that differ between two entries",
       "Which components of two entries' keys differ (graph, inputs, configs, environment, ...), field by field where\n"
       "the manifests keep the fields: why a compile missed an entry made earlier.\n"},
      {"rm", "KEY...", "remove entries", "Removes the named entries (full keys or unique prefixes).\n"},
      {"clear", "", "remove all entries (statistics stay)",
       "Removes every entry and the graph index; the statistics and quarantine/ stay.\n"},
      {"prune", "[--max-size SIZE] [--older-than AGE]",
       "remove entries unused for AGE, then the least recently used down to SIZE",
       "Removes the entries unused for AGE (7d, 12h, 30m), then entries chosen by the eviction policy\n"
       "(AOTCACHE_EVICTION=lru|saved-per-byte) until the directory holds at most SIZE (10G, 500M; default\n"
       "$AOTCACHE_MAX_SIZE or 10G).\n"},
      {"verify", "[--fix]", "check every entry's checksum and format",
       "Checks every entry's checksum, format and (with AOTCACHE_SIGNING_KEY) signature. Entries not signed by an\n"
       "accepted key are reported apart and left in place.\n"
       "  --fix    move the bad entries to quarantine/\n"},
      {"export", "FILE [KEY...]", "write all entries (or the named ones) to one archive file",
       "Writes every entry, or the named ones, to the archive FILE (created private, mode 0600), each verified "
       "first.\n"},
      {"import", "FILE", "add an archive's entries, each verified first",
       "Adds the entries of an archive made by export; each is verified first and bad ones are skipped (exit 1 when\n"
       "any was). Creates the cache directory when it does not exist.\n"},
      {"run", "[--dir DIR] [--] COMMAND [ARGS...]",
       "run COMMAND with torch.compile's default backend going through aotcache",
       "Runs COMMAND with every torch.compile of its process tree that uses the default backend (inductor) going\n"
       "through aotcache: sets AOTCACHE_ENABLE=1 (read at interpreter start through aotcache-enable.pth) and, with\n"
       "--dir, AOTCACHE_DIR. Works under torchrun, accelerate launch, python -m, shell scripts. Replaces this\n"
       "process: COMMAND's exit status and signals are the caller's (127: COMMAND not found).\n"
       "Options of run come before COMMAND; `--` ends them (aotcache run -- python train.py --help).\n"
       "  --dir DIR   the cache directory for COMMAND's processes\n"
       "  -h, --help  this text\n"},
  };
  return k_help;
}

const CommandHelp* find_command_help(const std::string& name) {
  const auto& all = command_help();
  auto it = std::find_if(all.begin(), all.end(), [&](const CommandHelp& h) { return name == h.name; });
  return it == all.end() ? nullptr : &*it;
}

std::string usage_line(const std::string& name) {
  const CommandHelp* h = find_command_help(name);
  if (h == nullptr) return "usage: aotcache [--dir DIR] COMMAND [ARGS]\n";
  std::string line = std::string("usage: aotcache ") + h->name;
  if (*h->synopsis != '\0') line += std::string(" ") + h->synopsis;
  return line + "\n";
}

std::string command_usage(const std::string& name) {
  const CommandHelp* h = find_command_help(name);
  if (h == nullptr) return program_usage();
  return usage_line(name) + "\n" + h->description +
         "\nGlobal options: --dir DIR (default: $AOTCACHE_DIR or ~/.cache/aotcache).\n";
}

std::string program_usage() {
  std::string text =
      "usage: aotcache [--dir DIR] COMMAND [ARGS]\n"
      "\n"
      "Inspect and manage an aotcache cache directory (default: $AOTCACHE_DIR or ~/.cache/aotcache).\n"
      "\n"
      "commands:\n";
  for (const CommandHelp& h : command_help()) {
    std::string head = std::string("  ") + h.name;
    if (*h.synopsis != '\0') head += std::string(" ") + h.synopsis;
    if (head.size() < 28) {
      text += head + std::string(28 - head.size(), ' ') + h.summary + "\n";
    } else {
      text += head + "\n" + std::string(28, ' ') + h.summary + "\n";
    }
  }
  text +=
      "\n"
      "`aotcache COMMAND --help` explains one command. verify, export, import, prune and clear show a progress bar\n"
      "when stderr is a terminal. AOTCACHE_EVICTION=lru|saved-per-byte picks what prune and the size bound remove\n"
      "first. AOTCACHE_SIGNING_KEY (and AOTCACHE_SIGNING_KEYS_ACCEPTED) make entries not signed by an accepted key\n"
      "untrusted: verify reports them apart and leaves them in place.\n"
      "Exit codes: 0 ok, 1 failure, 2 bad arguments.\n";
  return text;
}

}  // namespace aotcache::cli
