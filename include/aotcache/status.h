// Status and Result<T>: the one error channel of the C++ core. No exception crosses the core's API;
// the Python bindings turn a Status into an exception and the CLI's main turns it into an exit code.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace aotcache {

// A small canonical set of codes, after absl: pick the one that tells the caller what to do.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something malformed; retrying will not help
  kNotFound,         // a named thing does not exist (a cache miss is std::nullopt, not this)
  kCorruption,       // stored bytes fail their checks (bad magic, checksum, truncation)
  kIOError,          // the file system failed (full disk, permissions, read-only)
  kUnsupported,      // well-formed but not handled (a newer format version, an unknown value kind)
  kInternal,         // a broken invariant of aotcache itself
  kUnauthenticated,  // well-formed bytes whose signature is missing, unknown or wrong: never load them
  kUnavailable,      // a remote service is down, refused or timed out; transient, the caller goes on without it
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: entry checksum mismatch" or "OK".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  // REQUIRES: !ok()
  const Status& status() const { return std::get<Status>(v_); }
  // REQUIRES: ok()
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace aotcache

#define AOTCACHE_CONCAT_INNER_(a, b) a##b
#define AOTCACHE_CONCAT_(a, b) AOTCACHE_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-ok Status.
#define AOTCACHE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::aotcache::Status aotcache_status_ = (expr);        \
    if (!aotcache_status_.ok()) return aotcache_status_; \
  } while (0)

// `lhs = value of expr` or return its Status. `lhs` may declare a variable: AOTCACHE_ASSIGN_OR_RETURN(auto x, f());
#define AOTCACHE_ASSIGN_OR_RETURN(lhs, expr) \
  AOTCACHE_ASSIGN_OR_RETURN_IMPL_(AOTCACHE_CONCAT_(aotcache_result_, __LINE__), lhs, expr)
#define AOTCACHE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
