#pragma once
// The config file's YAML read with positions: every error a reader raises
// says "file:line:column: message", and every scalar may hold ${NAME}.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/duration.hpp"

namespace tokengate::config {

// Wraps a YAML node with the file name so every error can say where it is.
class reader {
 public:
  reader(YAML::Node node, const std::string& file) : node_(std::move(node)), file_(file) {}

  [[noreturn]] void fail(const std::string& message) const { fail_at(node_, message); }

  [[noreturn]] void fail_at(const YAML::Node& at, const std::string& message) const {
    throw config_error(said_at(at, message));
  }

  // "file:line:column: message" (an error's text, or a warning's).
  std::string said_at(const YAML::Node& at, const std::string& message) const {
    auto mark = at.Mark();
    std::ostringstream out;
    out << file_ << ':' << (mark.line + 1) << ':' << (mark.column + 1) << ": " << message;
    return out.str();
  }

  // Rejects keys that the schema does not know: a typo must not silently
  // turn a limit off.
  void only_keys(std::initializer_list<std::string_view> allowed) const {
    if (!node_.IsMap()) fail("expected a mapping");
    for (const auto& entry : node_) {
      auto key = entry.first.as<std::string>();
      bool known = false;
      for (auto a : allowed) known = known || key == a;
      if (!known) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail_at(entry.first, "unknown key '" + key + "' (expected one of: " + list + ")");
      }
    }
  }

  bool has(const char* key) const { return node_.IsMap() && node_[key].IsDefined(); }
  reader child(const char* key) const { return reader(node_[key], file_); }
  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }

  std::string text(const char* key, std::string fallback) const {
    if (!has(key)) return fallback;
    auto n = node_[key];
    if (!n.IsScalar()) fail_at(n, std::string("'") + key + "' must be a string");
    return expand_env(n, n.as<std::string>());
  }

  template <typename Int>
  Int integer(const char* key, Int fallback, long long min, long long max) const {
    if (!has(key)) return fallback;
    auto n = node_[key];
    auto value = converted<long long>(n, key, "an integer");
    if (value < min || value > max)
      fail_at(n, std::string("'") + key + "' must be between " + std::to_string(min) + " and " +
                     std::to_string(max));
    return static_cast<Int>(value);
  }

  double number(const char* key, double fallback, double min, double max) const {
    if (!has(key)) return fallback;
    auto n = node_[key];
    auto value = converted<double>(n, key, "a number");
    if (!(value >= min && value <= max))
      fail_at(n, std::string("'") + key + "' must be between " + std::to_string(min) + " and " +
                     std::to_string(max));
    return value;
  }

  duration time(const char* key, duration fallback) const {
    if (!has(key)) return fallback;
    auto n = node_[key];
    const char* what = "a duration like 250ms, 5s or 2m";
    if (!n.IsScalar()) fail_at(n, std::string("'") + key + "' must be " + what);
    auto text = expand_env(n, n.Scalar());
    auto parsed = parse_duration(text);
    if (!parsed) fail_at(n, std::string("'") + key + "' must be " + what + substituted(n, text));
    return *parsed;
  }

  // A scalar's text with ${NAME} expanded, read as the type its key needs,
  // with YAML's own rules for that type: `port: ${LISTEN_PORT}` reads the
  // variable's value as if it had been written there.
  template <typename T>
  T converted(const YAML::Node& n, const char* key, const char* what) const {
    if (!n.IsScalar()) fail_at(n, std::string("'") + key + "' must be " + what);
    auto text = expand_env(n, n.Scalar());
    try {
      return YAML::Node(text).as<T>();
    } catch (const YAML::Exception&) {
      fail_at(n, std::string("'") + key + "' must be " + what + substituted(n, text));
    }
  }

  // Where a value came from the environment, what it became (for a key
  // that is not a string: never a secret).
  static std::string substituted(const YAML::Node& n, const std::string& text) {
    if (n.Scalar().find("${") == std::string::npos) return "";
    return " ('" + n.Scalar() + "' is '" + text + "')";
  }

  // ${NAME} is replaced by the environment variable NAME; a missing variable
  // is an error rather than an empty secret.
  std::string expand_env(const YAML::Node& at, const std::string& value) const {
    std::string out;
    std::size_t i = 0;
    while (i < value.size()) {
      auto start = value.find("${", i);
      if (start == std::string::npos) {
        out.append(value, i);
        break;
      }
      auto end = value.find('}', start);
      if (end == std::string::npos) fail_at(at, "unterminated ${ in '" + value + "'");
      out.append(value, i, start - i);
      auto name = value.substr(start + 2, end - start - 2);
      const char* env = std::getenv(name.c_str());
      if (!env) fail_at(at, "environment variable " + name + " is not set");
      out += env;
      i = end + 1;
    }
    return out;
  }

 private:
  YAML::Node node_;
  const std::string& file_;
};

}  // namespace tokengate::config
