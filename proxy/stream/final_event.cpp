#include "stream/final_event.hpp"

namespace tokengate::stream {

std::string make_limit_final_events(dialect d, long long output_tokens) {
  auto n = std::to_string(output_tokens);
  switch (d) {
    case dialect::openai_chat:
      return "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},"
             "\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    case dialect::openai_completions:
      return "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\","
             "\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    case dialect::anthropic_messages:
      return "event: message_delta\ndata: "
             "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\","
             "\"stop_sequence\":null},\"usage\":{\"output_tokens\":" +
             n + "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    case dialect::openai_responses:
      return "event: response.incomplete\ndata: "
             "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
             "\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{"
             "\"output_tokens\":" +
             n + "}}}\n\n";
    case dialect::other:
      return {};
  }
  return {};
}

}  // namespace tokengate::stream
