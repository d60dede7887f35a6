#include "server/head_bytes.hpp"

#include <boost/beast/http/status.hpp>

#include <charconv>

namespace tokengate {
namespace {

std::string_view version_text(unsigned version) { return version == 10 ? "HTTP/1.0" : "HTTP/1.1"; }

void append_fields(std::string& out, const http::fields& fields) {
  for (const auto& f : fields) {
    out += f.name_string();
    out += ": ";
    out += f.value();
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace

std::size_t fields_size(const http::fields& fields) {
  std::size_t n = 2;  // the blank line
  for (const auto& f : fields) n += f.name_string().size() + 2 + f.value().size() + 2;
  return n;
}

std::string head_bytes(const http::request_header<>& head) {
  auto method = head.method_string();
  auto target = head.target();
  std::string out;
  out.reserve(method.size() + target.size() + 12 + fields_size(head));
  out += method;
  out += ' ';
  out += target;
  out += ' ';
  out += version_text(head.version());
  out += "\r\n";
  append_fields(out, head);
  return out;
}

std::string head_bytes(const http::response_header<>& head) {
  // As Beast writes it: the message's own reason phrase, or the standard one.
  std::string_view reason = head.reason();
  if (reason.empty()) reason = http::obsolete_reason(head.result());
  std::string out;
  out.reserve(reason.size() + 16 + fields_size(head));
  out += version_text(head.version());
  char code[4];
  auto end = std::to_chars(code, code + sizeof code, head.result_int()).ptr;
  out += ' ';
  out.append(code, static_cast<std::size_t>(end - code));
  out += ' ';
  out += reason;
  out += "\r\n";
  append_fields(out, head);
  return out;
}

head_writer::head_writer(std::string_view method, std::string_view target, std::size_t fields_size) {
  out_.reserve(method.size() + target.size() + 12 + fields_size);
  out_ += method;
  out_ += ' ';
  out_ += target;
  out_ += " HTTP/1.1\r\n";
}

head_writer::head_writer(unsigned status, std::string_view reason, std::size_t fields_size) {
  out_.reserve(reason.size() + 16 + fields_size);
  char code[10];
  auto end = std::to_chars(code, code + sizeof code, status).ptr;
  out_ += "HTTP/1.1 ";
  out_.append(code, static_cast<std::size_t>(end - code));
  out_ += ' ';
  out_ += reason;
  out_ += "\r\n";
}

void head_writer::field(std::string_view name, std::string_view value) {
  out_ += name;
  out_ += ": ";
  out_ += value;
  out_ += "\r\n";
}

std::string head_writer::finish() && {
  out_ += "\r\n";
  return std::move(out_);
}

}  // namespace tokengate
