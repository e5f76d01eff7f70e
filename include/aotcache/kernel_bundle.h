// Kernel bundle v1 (docs/formats/kernel-bundle-format.md): the compiled C++ kernel libraries a graph's compile
// produced, carried in an entry (section 7) so that a hit on a machine whose Inductor cache directory lacks them loads
// them instead of running the C++ compiler again. The bundle states the machine it was built on (`fingerprint`, written
// and compared by the Python layer); files are installed only where that fingerprint matches this machine's.
//
// Loading a library runs its code: a bundle is only ever read out of an entry that passed the entry checks (and the
// signature check when a signing key is set), exactly as the payload is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "aotcache/file_system.h"
#include "aotcache/status.h"

namespace aotcache {

inline constexpr uint32_t k_kernel_bundle_format_version = 1;
// Bounds of what a reader accepts (a writer refuses more, InvalidArgument).
inline constexpr size_t k_kernel_bundle_max_files = 4096;
inline constexpr size_t k_kernel_path_max = 512;

struct KernelFile {
  std::string path;   // relative to Inductor's cache directory, '/'-separated (check_kernel_path)
  std::string bytes;  // the file's contents

  bool operator==(const KernelFile&) const = default;
};

struct KernelBundle {
  std::string fingerprint;  // the building machine, as the Python layer describes it (canonical JSON text)
  std::vector<KernelFile> files;

  bool operator==(const KernelBundle&) const = default;
};

// OK for a path a bundle may carry: 1-8 components of [A-Za-z0-9._-], not "." or "..", none starting with '.',
// no leading or doubled '/', at most k_kernel_path_max bytes. InvalidArgument otherwise, naming the rule.
Status check_kernel_path(std::string_view path);

// InvalidArgument for a bad path, a repeated path, too many files or an empty fingerprint.
Result<std::string> encode_kernel_bundle(const KernelBundle& bundle);
// Corruption for anything encode_kernel_bundle would not write (including bad or repeated paths), a truncated
// record or trailing bytes; Unsupported for a newer format version. Never crashes on arbitrary bytes.
Result<KernelBundle> decode_kernel_bundle(std::string_view bytes);

struct KernelInstallReport {
  size_t installed = 0;  // files written
  size_t present = 0;    // files already there (left as they are: never overwritten)
};

// Writes each file of `bundle` missing under `dir` (created as needed): a temp file in the target's directory,
// synced, then renamed into place, so a concurrent reader (torch loading the same kernel) sees no file or the whole
// one. Existing files are not touched. Stops at the first failure (IOError naming the file); the files written
// before it stay (each is whole).
Result<KernelInstallReport> install_kernel_bundle(FileSystem* fs, const KernelBundle& bundle, const std::string& dir);

}  // namespace aotcache
