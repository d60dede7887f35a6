#pragma once
// Changes to a request body as byte ranges replaced, never as a document
// re-serialised: the policy (routing/) decides them from one scan of the
// body, and the upstream request sends the client's bytes around them as
// the pieces of one scatter write, so a 200 KB prompt is never copied to
// change its model name.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "io/net.hpp"

namespace tokengate::upstream {

struct splice {
  std::size_t begin, end;  // replaced range
  std::string replacement;
};

// By position, as apply_splices and body_pieces expect.
void sort_splices(std::vector<splice>& edits);

// The text with the edits applied, as one string.
std::string apply_splices(std::string_view text, std::vector<splice> edits);

// `body` with the (sorted) edits applied, appended to `pieces` as buffers
// pointing into both: nothing is copied.
void body_pieces(std::string_view body, const std::vector<splice>& edits,
                 std::vector<net::const_buffer>& pieces);

}  // namespace tokengate::upstream
