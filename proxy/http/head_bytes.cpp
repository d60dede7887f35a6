#include "http/head_bytes.hpp"

#include <boost/beast/http/status.hpp>
#include <charconv>
#include <string>

namespace tokengate {
namespace {

std::string_view version_text(unsigned version) { return version == 10 ? "HTTP/1.0" : "HTTP/1.1"; }

// Every field of a parsed or built head, in order.
std::string with_fields(head_writer out, const http::fields& fields) {
  for (const auto& f : fields) out.field(f.name_string(), f.value());
  return std::move(out).finish();
}

}  // namespace

std::size_t fields_size(const http::fields& fields) {
  std::size_t n = 2;  // the blank line
  for (const auto& f : fields) n += f.name_string().size() + 2 + f.value().size() + 2;
  return n;
}

std::string head_bytes(const http::request_header<>& head) {
  return with_fields(
      head_writer(head.method_string(), head.target(), fields_size(head), head.version()), head);
}

std::string head_bytes(const http::response_header<>& head) {
  // As Beast writes it: the message's own reason phrase, or the standard one.
  std::string_view reason = head.reason();
  if (reason.empty()) reason = http::obsolete_reason(head.result());
  return with_fields(head_writer(head.result_int(), reason, fields_size(head), head.version()),
                     head);
}

head_writer::head_writer(std::string_view method, std::string_view target, std::size_t fields_size,
                         unsigned version) {
  out_.reserve(method.size() + target.size() + 12 + fields_size);
  out_ += method;
  out_ += ' ';
  out_ += target;
  out_ += ' ';
  out_ += version_text(version);
  out_ += "\r\n";
}

head_writer::head_writer(unsigned status, std::string_view reason, std::size_t fields_size,
                         unsigned version) {
  out_.reserve(reason.size() + 16 + fields_size);
  char code[10];
  auto end = std::to_chars(code, code + sizeof code, status).ptr;
  out_ += version_text(version);
  out_ += ' ';
  out_.append(code, static_cast<std::size_t>(end - code));
  out_ += ' ';
  out_ += reason;
  out_ += "\r\n";
}

// One growth of the string and two copies, not four appends (each with its
// own capacity check and copy call): every forwarded field of both heads
// passes here.
void head_writer::field(std::string_view name, std::string_view value) {
  const auto at = out_.size();
  out_.resize(at + name.size() + value.size() + 4);
  char* p = out_.data() + at;
  // (char_traits' copy takes an empty view's null pointer; memcpy may not.)
  std::char_traits<char>::copy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::char_traits<char>::copy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

std::string head_writer::finish() && {
  out_ += "\r\n";
  return std::move(out_);
}

}  // namespace tokengate
