#pragma once
#include <boost/asio/buffer.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/net.hpp"

namespace tokengate::stream {

// Event streams are forwarded whole events at a time: the bytes of an event
// not yet complete wait here (an SSE client cannot act on half an event, so
// no event reaches it later), which lets the proxy cut or hold back whole
// events exactly. An unfinished event larger than the bound is forwarded as
// it comes.
class event_aligner {
 public:
  static constexpr std::size_t max_held = 64 * 1024;

  // Which bytes of [forwarded, upto) to send now, minus the dropped ranges;
  // `chunk` holds the stream from absolute offset `chunk_at`.
  void plan(std::string_view chunk, std::uint64_t chunk_at, std::uint64_t upto,
            std::vector<std::pair<std::uint64_t, std::uint64_t>>& drops,
            std::vector<net::const_buffer>& out) {
    out.clear();
    auto emit = [&](std::uint64_t from, std::uint64_t to) {
      // [from, to) lies in held_ (before chunk_at) and/or in chunk.
      if (from >= to) return;
      if (from < chunk_at) {
        auto held_to = std::min(to, chunk_at);
        out.emplace_back(held_.data() + (from - held_at_), held_to - from);
        from = held_to;
      }
      if (from < to) out.emplace_back(chunk.data() + (from - chunk_at), to - from);
    };
    auto at = forwarded_;
    for (const auto& [from, to] : drops) {
      if (from < at || from >= upto) continue;  // already partly sent, or not complete yet
      emit(at, from);
      at = to;
    }
    emit(at, upto);
    std::erase_if(drops, [&](const auto& d) { return d.second <= upto; });
    if (upto > forwarded_) forwarded_ = upto;
  }

  // After the write: keep [forwarded, chunk end) for later.
  void keep_rest(std::string_view chunk, std::uint64_t chunk_at) {
    auto end = chunk_at + chunk.size();
    std::string rest;
    if (forwarded_ < chunk_at) rest.assign(held_, forwarded_ - held_at_);
    auto from = std::max(forwarded_, chunk_at);
    if (from < end) rest.append(chunk.substr(from - chunk_at));
    held_ = std::move(rest);
    held_at_ = forwarded_;
  }

  bool holding_too_much() const { return held_.size() > max_held; }
  std::uint64_t forwarded() const { return forwarded_; }

 private:
  std::string held_;
  std::uint64_t held_at_ = 0;  // absolute offset of held_[0]
  std::uint64_t forwarded_ = 0;
};

}  // namespace tokengate::stream
