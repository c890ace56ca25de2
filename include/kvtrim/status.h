// Errors as values at the library boundary (STYLE.md practice 11).
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace kvtrim {

// What kind of failure: most are plain errors; `kUnreachable` marks a
// request that is valid but cannot be met for this input (a retention ratio
// below what a method can reach), which an eval reports as a cell, not a crash;
// `kUnavailable` a store that is down or full (a Redis server that cannot be
// reached, a disk with no space): the same request may succeed later (the
// server answers 503).
enum class ErrorCode { kError, kUnreachable, kUnavailable };

// A failed operation: a human-readable message naming the problem.
struct Error {
  std::string message;
  ErrorCode code = ErrorCode::kError;
};

// Expected<T>: either a value or an Error. The library never exits.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}            // NOLINT(implicit)
  Expected(Error err) : v_(std::move(err)) {}            // NOLINT(implicit)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Status: success or an Error.
class Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err.message)), code_(err.code), failed_(true) {}  // NOLINT
  static Status Ok() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return err_; }
  ErrorCode code() const { return code_; }
  Error error() const { return Error{err_, code_}; }

 private:
  std::string err_;
  ErrorCode code_ = ErrorCode::kError;
  bool failed_ = false;
};

inline Error MakeError(std::string msg) { return Error{std::move(msg)}; }
inline Error MakeUnavailable(std::string msg) { return Error{std::move(msg), ErrorCode::kUnavailable}; }
inline Error MakeUnreachable(std::string msg) { return Error{std::move(msg), ErrorCode::kUnreachable}; }

}  // namespace kvtrim

// Propagate a failed Status/Expected from an expression.
#define KVTRIM_RETURN_IF_ERROR(expr)                      \
  do {                                                    \
    auto _st = (expr);                                    \
    if (!_st.ok()) return ::kvtrim::Error{_st.error()};   \
  } while (0)
