#include "redis/store_health.hpp"

#include <spdlog/spdlog.h>

namespace tokengate::redis {

void store_health::failed(std::string_view why) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  if (up_.exchange(false, std::memory_order_relaxed))
    spdlog::warn("{}: {} does not answer ({}); {}", user_, where_, why, while_down_);
}

void store_health::answered() {
  if (!up_.load(std::memory_order_relaxed) && !up_.exchange(true, std::memory_order_relaxed))
    spdlog::info("{}: {} answers again; {}", user_, where_, when_back_);
}

void store_health::settle_failed(std::string_view why) {
  settlements_failed_.fetch_add(1, std::memory_order_relaxed);
  if (!settle_failing_.exchange(true, std::memory_order_relaxed))
    spdlog::warn(
        "budgets: a settlement did not reach {} ({}); the usage it carried is counted "
        "in tokengate_budget_settlements_total{{result=\"failed\"}}",
        where_, why);
}

}  // namespace tokengate::redis
