#include "redis/resp.hpp"

#include <charconv>

namespace tokengate::redis {
namespace {

constexpr long long max_array_elements = 1'000'000;
constexpr int max_depth = 8;

// The line from `pos` to its CRLF; nullopt while the CRLF has not arrived.
std::optional<std::string_view> line_at(std::string_view data, std::size_t& pos) {
  auto end = data.find("\r\n", pos);
  if (end == std::string_view::npos) {
    if (data.size() - pos > 4096) throw protocol_error("a reply line longer than 4 KB");
    return std::nullopt;
  }
  auto line = data.substr(pos, end - pos);
  pos = end + 2;
  return line;
}

long long number_in(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty())
    throw protocol_error("not a number in a reply: '" + std::string(text.substr(0, 32)) + "'");
  return value;
}

std::optional<reply> parse_at(std::string_view data, std::size_t& pos, int depth) {
  if (depth > max_depth) throw protocol_error("a reply nested too deep");
  if (pos >= data.size()) return std::nullopt;
  const char marker = data[pos++];
  auto line = line_at(data, pos);
  if (!line) return std::nullopt;
  reply r;
  switch (marker) {
    case '+':
      r.kind = reply::type::simple;
      r.text = *line;
      return r;
    case '-':
      r.kind = reply::type::error;
      r.text = *line;
      return r;
    case ':':
      r.kind = reply::type::integer;
      r.integer = number_in(*line);
      return r;
    case '$': {
      auto length = number_in(*line);
      if (length == -1) return r;  // nil
      if (length < 0 || length > max_bulk_bytes)
        throw protocol_error("a bulk string out of bounds");
      if (data.size() - pos < static_cast<std::size_t>(length) + 2) return std::nullopt;
      if (data.substr(pos + length, 2) != "\r\n")
        throw protocol_error("a bulk string without CRLF");
      r.kind = reply::type::bulk;
      r.text = data.substr(pos, length);
      pos += length + 2;
      return r;
    }
    case '*': {
      auto count = number_in(*line);
      if (count == -1) return r;  // nil array
      if (count < 0 || count > max_array_elements) throw protocol_error("an array out of bounds");
      r.kind = reply::type::array;
      for (long long i = 0; i < count; ++i) {
        auto element = parse_at(data, pos, depth + 1);
        if (!element) return std::nullopt;
        r.elements.push_back(std::move(*element));
      }
      return r;
    }
    default:
      throw protocol_error("a reply starting with an unknown byte");
  }
}

}  // namespace

std::optional<long long> reply::integer_at(std::size_t i) const {
  if (kind != type::array || i >= elements.size()) return std::nullopt;
  const auto& e = elements[i];
  if (e.kind == type::integer) return e.integer;
  if (e.kind != type::bulk) return std::nullopt;
  try {
    return number_in(e.text);
  } catch (const protocol_error&) {
    return std::nullopt;
  }
}

void append_command(std::string& out, const std::vector<std::string>& args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const auto& a : args) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out += a;
    out += "\r\n";
  }
}

std::optional<reply> parse_reply(std::string_view data, std::size_t& consumed) {
  std::size_t pos = 0;
  auto r = parse_at(data, pos, 0);
  if (r) consumed = pos;
  return r;
}

}  // namespace tokengate::redis
