#pragma once
// A Beast body made of pieces that live elsewhere: the client's request body
// around the few values the policy changed, and the changed values. The
// upstream request is written from them with the head in one scatter write,
// so a 200 KB prompt is never copied to change its model name.
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include <span>
#include <utility>
#include <vector>

#include "net.hpp"

namespace tokengate::upstream {

struct pieces_body {
  using value_type = std::vector<net::const_buffer>;

  static std::uint64_t size(const value_type& pieces) { return net::buffer_size(pieces); }

  class writer {
   public:
    using const_buffers_type = std::span<const net::const_buffer>;

    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& pieces) : pieces_(pieces) {}

    void init(error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(error_code& ec) {
      ec = {};
      return std::pair<const_buffers_type, bool>(pieces_, false);  // all of it at once
    }

   private:
    const value_type& pieces_;
  };
};

}  // namespace tokengate::upstream
