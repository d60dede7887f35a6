#include "upstream/body_edits.hpp"

#include <utility>

namespace tokengate::upstream {

void sort_splices(std::vector<splice>& edits) {
  // A request has two or three edits: an insertion sort, stable as the
  // order of equal positions requires, without the buffer std::stable_sort
  // allocates for every call.
  for (std::size_t i = 1; i < edits.size(); ++i)
    for (std::size_t j = i; j > 0 && edits[j].begin < edits[j - 1].begin; --j)
      std::swap(edits[j], edits[j - 1]);
}

std::string apply_splices(std::string_view text, std::vector<splice> edits) {
  sort_splices(edits);
  std::string out;
  std::size_t growth = 0;
  for (const auto& e : edits) growth += e.replacement.size();
  out.reserve(text.size() + growth);
  std::size_t at = 0;
  for (const auto& e : edits) {
    out.append(text.substr(at, e.begin - at));
    out.append(e.replacement);
    at = e.end;
  }
  out.append(text.substr(at));
  return out;
}

void body_pieces(std::string_view body, const std::vector<splice>& edits,
                 std::vector<net::const_buffer>& pieces) {
  std::size_t at = 0;
  for (const auto& e : edits) {
    pieces.emplace_back(body.data() + at, e.begin - at);
    pieces.emplace_back(e.replacement.data(), e.replacement.size());
    at = e.end;
  }
  pieces.emplace_back(body.data() + at, body.size() - at);
}

}  // namespace tokengate::upstream
