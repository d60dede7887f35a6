#pragma once
// Budgets count in windows of a minute: a test that must stay inside one
// waits out a minute's last `seconds_needed` seconds first.
#include <chrono>
#include <thread>

namespace tokengate::test {

inline void inside_one_minute(int seconds_needed) {
  while (std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
                 .count() %
             60 >
         59 - seconds_needed)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

}  // namespace tokengate::test
