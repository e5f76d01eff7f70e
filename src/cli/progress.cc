// Progress bar: "\r<label> [#####-----] done/total  pct%", redrawn in place.
#include "cli/progress.h"

#include <unistd.h>

#include <ostream>

namespace aotcache::cli {

Progress::Progress(std::ostream* err, std::string label)
    : Progress(err, std::move(label), isatty(STDERR_FILENO) != 0) {}

Progress::Progress(std::ostream* err, std::string label, bool enabled)
    : err_(err), label_(std::move(label)), enabled_(enabled) {}

void Progress::update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int k_width = 30;
  const int filled = static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * k_width);
  *err_ << "\r" << label_ << " [" << std::string(static_cast<size_t>(filled), '#')
        << std::string(static_cast<size_t>(k_width - filled), '-') << "] " << done << "/" << total << "  "
        << done * 100 / total << "%" << std::flush;
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) *err_ << "\n" << std::flush;
  drawn_ = false;
}

}  // namespace aotcache::cli
