// Kernel bundle format: round trip, golden bytes, path rules, damage, and installation into a directory.
#include "aotcache/kernel_bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "aotcache/entry.h"
#include "base/bytes.h"
#include "base/sha256.h"
#include "env/fault_injecting_file_system.h"

namespace aotcache {
namespace {

KernelBundle sample_bundle() {
  return {"{\"cpu\":\"x\"}",
          {{"ab/cabcdef.main.so", std::string("\x7f"
                                              "ELF\0\1",
                                              6)},
           {"cd/k2.so", "lib2"}}};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/aotcache-kernels-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string slurp(const std::string& path) {
  auto r = default_file_system()->read_file(path);
  return r.ok() && r->has_value() ? **r : std::string("<missing>");
}

TEST(KernelBundle, RoundTrip) {
  const KernelBundle b = sample_bundle();
  auto back = decode_kernel_bundle(encode_kernel_bundle(b).value());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, b);
  KernelBundle empty{"fp", {}};
  EXPECT_EQ(decode_kernel_bundle(encode_kernel_bundle(empty).value()).value(), empty);
}

TEST(KernelBundle, GoldenBytes) {
  // docs/formats/kernel-bundle-format.md §3 lists these bytes.
  const KernelBundle b{"fp", {{"ab/k.so", "ELF"}}};
  EXPECT_EQ(internal::to_hex(encode_kernel_bundle(b).value()),
            "01000000"                // version 1
            "020000006670"            // fingerprint "fp"
            "01000000"                // one file
            "0700000061622f6b2e736f"  // "ab/k.so"
            "03000000454c46");        // "ELF"
}

TEST(KernelBundle, PathRules) {
  for (const char* ok : {"a", "ab/cdef.main.so", "x-y_z.1/2/3", "a/b/c/d/e/f/g/h"}) {
    EXPECT_TRUE(check_kernel_path(ok).ok()) << ok;
  }
  for (const char* bad : {"", "/abs.so", "a//b", "a/", "../x", "a/../b", "..", ".", ".hidden", "a/.b", "a b", "a\\b",
                          "a/b/c/d/e/f/g/h/i", "caf\xc3\xa9"}) {
    EXPECT_EQ(check_kernel_path(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(check_kernel_path(std::string(513, 'a')).ok());
  EXPECT_TRUE(check_kernel_path(std::string(512, 'a')).ok());
}

TEST(KernelBundle, WriterRefusesWhatReadersWouldRefuse) {
  EXPECT_EQ(encode_kernel_bundle({"fp", {{"../evil.so", "x"}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_kernel_bundle({"fp", {{"a.so", "x"}, {"a.so", "y"}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_kernel_bundle({"", {}}).status().code(), StatusCode::kInvalidArgument);
}

TEST(KernelBundle, ReaderRefusesBadPathsAndDuplicates) {
  // Hand-built bytes a writer would refuse: a path escaping the directory, and a repeated path.
  internal::ByteWriter w;
  w.u32(1);
  w.str("fp");
  w.u32(1);
  w.str("../../home/user/.bashrc");
  w.str("x");
  auto escape = decode_kernel_bundle(w.bytes());
  EXPECT_EQ(escape.status().code(), StatusCode::kCorruption);
  internal::ByteWriter d;
  d.u32(1);
  d.str("fp");
  d.u32(2);
  d.str("a.so");
  d.str("x");
  d.str("a.so");
  d.str("y");
  EXPECT_EQ(decode_kernel_bundle(d.bytes()).status().code(), StatusCode::kCorruption);
}

TEST(KernelBundle, EveryTruncationAndTrailingByteIsRefused) {
  const std::string bytes = encode_kernel_bundle(sample_bundle()).value();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_kernel_bundle(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n;
  }
  EXPECT_EQ(decode_kernel_bundle(bytes + "x").status().code(), StatusCode::kCorruption);
}

TEST(KernelBundle, NewerVersionIsUnsupportedAndZeroIsCorrupt) {
  std::string bytes = encode_kernel_bundle(sample_bundle()).value();
  bytes[0] = 2;
  EXPECT_EQ(decode_kernel_bundle(bytes).status().code(), StatusCode::kUnsupported);
  bytes[0] = 0;
  EXPECT_EQ(decode_kernel_bundle(bytes).status().code(), StatusCode::kCorruption);
}

TEST(KernelBundle, HugeCountsDoNotAllocate) {
  internal::ByteWriter w;
  w.u32(1);
  w.str("fp");
  w.u32(0xffffffffu);
  EXPECT_EQ(decode_kernel_bundle(w.bytes()).status().code(), StatusCode::kCorruption);
}

TEST(KernelBundle, InstallWritesMissingFilesAndLeavesPresentOnes) {
  TempDir dir;
  FileSystem* fs = default_file_system();
  ASSERT_TRUE(fs->create_dirs(dir.path() + "/cd").ok());
  ASSERT_TRUE(fs->write_file_atomic(dir.path() + "/cd/k2.so", "built here", dir.path()).ok());
  auto report = install_kernel_bundle(fs, sample_bundle(), dir.path());
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->installed, 1u);
  EXPECT_EQ(report->present, 1u);
  EXPECT_EQ(slurp(dir.path() + "/ab/cabcdef.main.so"), sample_bundle().files[0].bytes);
  EXPECT_EQ(slurp(dir.path() + "/cd/k2.so"), "built here");  // never overwritten
  // No temp file is left next to the installed ones.
  for (const auto& sub : {"ab", "cd"}) {
    const std::vector<DirEntry> listed = fs->list_dir(dir.path() + "/" + sub).value();
    for (const auto& e : listed) {
      EXPECT_EQ(e.name.rfind("tmp.", 0), std::string::npos) << e.name;
    }
  }
  auto again = install_kernel_bundle(fs, sample_bundle(), dir.path());
  EXPECT_EQ(again->installed, 0u);
  EXPECT_EQ(again->present, 2u);
}

TEST(KernelBundle, InstallRefusesABadPathBuiltInMemory) {
  TempDir dir;
  auto r = install_kernel_bundle(default_file_system(), {"fp", {{"../escape.so", "x"}}}, dir.path() + "/inner");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/escape.so"));
}

TEST(KernelBundle, InstallFaultsReportAndLeaveNoPartialFile) {
  for (Fault fault : {Fault::kNoSpace, Fault::kReadOnly, Fault::kRenameFails, Fault::kSyncFails}) {
    TempDir dir;
    FaultInjectingFileSystem fs(default_file_system());
    ASSERT_TRUE(fs.create_dirs(dir.path() + "/ab").ok());
    fs.set_fault(fault);
    auto r = install_kernel_bundle(&fs, sample_bundle(), dir.path());
    EXPECT_EQ(r.status().code(), StatusCode::kIOError) << fault_name(fault);
    fs.set_fault(Fault::kNone);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ab/cabcdef.main.so")) << fault_name(fault);
    EXPECT_TRUE(fs.list_dir(dir.path() + "/ab").value().empty()) << fault_name(fault);
  }
}

TEST(KernelBundle, EntryCarriesTheBundleCoveredByChecksumAndSignature) {
  Entry e;
  e.key_digest = std::string(32, '\0');
  e.metadata = Value::dict({});
  e.payload = "p";
  // A manifest that hashes to the key digest: the empty one.
  e.key_digest = key_digest_of(e.manifest);
  e.kernels = encode_kernel_bundle(sample_bundle()).value();
  SigningKeys keys;
  keys.keys.push_back({"k1", std::string(32, 's')});
  const std::string bytes = encode_entry(e, PayloadCompression::kZstd, &keys).value();
  auto back = decode_entry(bytes, &keys);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->kernels, e.kernels);
  EXPECT_EQ(decode_kernel_bundle(back->kernels).value(), sample_bundle());
  // A kernel byte changed and the checksum recomputed (a forger without the key): the signature refuses it.
  const size_t at = bytes.find("lib2");
  ASSERT_NE(at, std::string::npos);
  std::string forged = bytes;
  forged[at] = 'L';
  std::string body = forged.substr(0, forged.size() - 32);
  forged = body + internal::sha256(body);
  EXPECT_EQ(decode_entry(forged, &keys).status().code(), StatusCode::kUnauthenticated);
  // Without kernels the entry is byte for byte what it was before the section existed.
  Entry plain = e;
  plain.kernels.clear();
  EXPECT_EQ(encode_entry(plain).value().find("lib2"), std::string::npos);
}

}  // namespace
}  // namespace aotcache
