// A one-line progress bar on stderr for long CLI operations (verify, export, import, prune, clear). Drawn only
// when stderr is a terminal, so pipes, logs and tests see nothing of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace aotcache::cli {

class Progress {
 public:
  // Enabled when stderr is a terminal.
  Progress(std::ostream* err, std::string label);
  Progress(std::ostream* err, std::string label, bool enabled);
  ~Progress() { finish(); }
  // Redraws at most every 100 ms, and always when done == total.
  void update(uint64_t done, uint64_t total);
  // Ends the line, once, if anything was drawn.
  void finish();
  bool enabled() const { return enabled_; }

 private:
  std::ostream* err_;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace aotcache::cli
