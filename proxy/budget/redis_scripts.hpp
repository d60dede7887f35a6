#pragma once
// The Lua scripts that count budgets inside Redis. Each runs atomically:
// no other command interleaves, so a check and its reservation are one
// step for every instance sharing the store. Windows are computed from
// Redis's own clock (TIME), the one clock all instances agree on, exactly
// as window_of() computes them (budget/ledger.cpp; a test holds the two to
// agreement).
//
// Key names are built inside the scripts from that clock, which a Redis
// Cluster would refuse (it needs them declared); a single Redis, or one
// with replicas, is what they are for.
#include <string_view>

namespace tokengate::budget::scripts {

// Redis's clock as `now` (Unix ms) and window(kind): the start and end
// of the window of `kind` that holds it.
inline constexpr std::string_view clock_and_windows = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function year_month(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
                          - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end
local function window(kind)
  if kind == 'requests_per_minute' or kind == 'tokens_per_minute' then
    local s = now - now % 60000
    return s, s + 60000
  elseif kind == 'tokens_per_day' or kind == 'usd_per_day' then
    local s = now - now % 86400000
    return s, s + 86400000
  end
  local y, m = year_month(math.floor(now / 86400000))
  local ny, nm = y, m + 1
  if nm > 12 then ny, nm = y + 1, 1 end
  return days_from_civil(y, m, 1) * 86400000, days_from_civil(ny, nm, 1) * 86400000
end
)lua";

// (after clock_and_windows) ARGV: prefix, reservation id, slot ttl ms,
// then per counter: scope, kind, limit, amount, lease. Returns {refused (0,
// or the 1-based counter), then per counter: used, reset ms, key, leased}.
// When every amount fits, each window counter also grants up to `lease`
// more of what is left (counted as used here): the instance admits its
// next requests from that without a round trip (budget/lease_book.hpp).
inline constexpr std::string_view reserve = R"lua(
local prefix, id, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local n = (#ARGV - 3) / 5
local keys, used, reset, ends, amounts, limits, leased = {}, {}, {}, {}, {}, {}, {}
local refused = 0
for i = 1, n do
  local b = 3 + (i - 1) * 5
  local scope, kind, limit = ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3])
  amounts[i] = tonumber(ARGV[b + 4])
  limits[i] = limit
  leased[i] = 0
  if kind == 'concurrent_streams' then
    keys[i] = prefix .. ':' .. scope .. ':' .. kind
    redis.call('ZREMRANGEBYSCORE', keys[i], '-inf', now)
    used[i] = redis.call('ZCARD', keys[i])
    reset[i] = 0
  else
    local s, e = window(kind)
    keys[i] = prefix .. ':' .. scope .. ':' .. kind .. ':' .. string.format('%d', s)
    used[i] = tonumber(redis.call('GET', keys[i]) or '0')
    reset[i] = e - now
    ends[i] = e
  end
  if refused == 0 and used[i] + amounts[i] > limit then refused = i end
end
if refused == 0 then
  for i = 1, n do
    if ends[i] == nil then
      redis.call('ZADD', keys[i], now + ttl, id)
      redis.call('PEXPIRE', keys[i], ttl)
    else
      local wish = tonumber(ARGV[3 + (i - 1) * 5 + 5])
      leased[i] = math.max(0, math.min(wish, limits[i] - used[i] - amounts[i]))
      redis.call('INCRBY', keys[i], amounts[i] + leased[i])
      redis.call('PEXPIREAT', keys[i], ends[i] + 60000)
    end
    used[i] = used[i] + amounts[i] + leased[i]
  end
end
local out = {refused}
for i = 1, n do
  out[#out + 1] = used[i]
  out[#out + 1] = reset[i]
  out[#out + 1] = keys[i]
  out[#out + 1] = leased[i]
end
return out
)lua";

// ARGV: reservation id, then per counter: key, delta. A window that ended
// meanwhile is left alone; a concurrency slot is given back.
inline constexpr std::string_view settle = R"lua(
local id = ARGV[1]
for i = 2, #ARGV, 2 do
  local key, delta = ARGV[i], tonumber(ARGV[i + 1])
  if string.sub(key, -19) == ':concurrent_streams' then
    redis.call('ZREM', key, id)
  elseif delta ~= 0 and redis.call('EXISTS', key) == 1 then
    local left = redis.call('INCRBY', key, delta)
    if left < 0 then redis.call('SET', key, 0, 'KEEPTTL') end
  end
end
return 1
)lua";

// (after clock_and_windows) ARGV: prefix, then per counter: scope, kind.
// Returns per counter: used, reset ms. Changes nothing.
inline constexpr std::string_view peek = R"lua(
local out = {}
for i = 2, #ARGV, 2 do
  local scope, kind = ARGV[i], ARGV[i + 1]
  local key = ARGV[1] .. ':' .. scope .. ':' .. kind
  if kind == 'concurrent_streams' then
    out[#out + 1] = redis.call('ZCOUNT', key, now, '+inf')
    out[#out + 1] = 0
  else
    local s, e = window(kind)
    out[#out + 1] = tonumber(redis.call('GET', key .. ':' .. string.format('%d', s)) or '0')
    out[#out + 1] = e - now
  end
end
return out
)lua";

// (after clock_and_windows) ARGV: per counter: key, delta, window end
// (Unix ms). What an instance counted alone while Redis did not answer,
// added to windows that are still open (a key lost with a restarted Redis
// is made anew); an ended window is left alone.
inline constexpr std::string_view carry = R"lua(
for i = 1, #ARGV, 3 do
  local key, delta, ends = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if ends > now and delta ~= 0 then
    local left = redis.call('INCRBY', key, delta)
    if left < 0 then redis.call('SET', key, 0) end
    redis.call('PEXPIREAT', key, ends + 60000)
  end
end
return 1
)lua";

}  // namespace tokengate::budget::scripts
