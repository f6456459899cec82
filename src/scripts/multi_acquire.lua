-- Take a MultiLock: every lock of the set, or none of them, in one atomic step.
-- Each lock uses exactly the Mutex layout, so a MultiLock over {a,b} excludes a Mutex on a.
-- KEYS     lock1, fence1, lock2, fence2, ...   (P{N} and P{N}:fence, names sorted)
--          [, roll1, roll2, ...]  with ARGV[3]: each lock's waiters' roll (P{N}:waiters, as
--          mutex_acquire.lua keeps it), in the same order
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  when the try is a waiter's (it listens on every lock's P{N}:ch): how long its place
--          counts, in milliseconds; optional. A busy lock's roll then gets the place '*', so
--          that a Mutex release, which otherwise names only the next Mutex waiter's Client,
--          comes to this waiter's turn and wakes every waiting process ('released' on P{N}:ch).
--          The place is shared by every such waiter, and lapses by itself.
-- Reply:   {1, token}  acquired; token is the new fencing token of the FIRST lock. Every
--                      lock's own counter was incremented too: while held, GET P{N}:fence is
--                      the token of lock N.
--          {0, pttl, i}  some lock is held; pttl is the remaining TTL of the first held one
--                      (-1: no expiry), i its position in the set (1-based, KEYS order)
--          {-1, type, key}  that lock key holds a value of another type, or that fencing
--                      counter holds no counter (next_token); no lock set
-- Nothing is written unless every lock is free, so no MultiLock ever holds a part of its set
-- and two MultiLocks over overlapping sets cannot deadlock.
--
-- A GET per lock key both finds it free and checks its type: TYPE is asked only when the GET
-- fails (issue #6: Redis calls per EVALSHA cost throughput).
local placing = ARGV[3] ~= nil and ARGV[3] ~= ''
local n = placing and #KEYS / 3 or #KEYS / 2
local busy, first_busy = nil, nil
local busy_at = {}
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return {-1, redis.call('TYPE', key)['ok'], key} end
  if v then
    if busy == nil then busy, first_busy = redis.call('PTTL', key), i end
    busy_at[#busy_at + 1] = i
  end
end
if busy ~= nil then
  -- pcall, as in mutex_acquire.lua: a roll of another type, or an ACL without TIME or the
  -- roll's commands, costs only the place (the waiter then hears of a Mutex release at its
  -- recheck, or when no Mutex waiter is left).
  local t = placing and redis.pcall('TIME')
  if type(t) == 'table' and t[2] then
    local ttl = tonumber(ARGV[3])
    local until_ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl)
    for _, i in ipairs(busy_at) do
      local roll = KEYS[2 * n + i]
      -- GT: a waiter with a shorter recheck interval never shortens another's place.
      if type(redis.pcall('ZADD', roll, 'GT', until_ms, '*')) == 'number' then
        if redis.call('PEXPIRE', roll, ttl, 'GT') == 0 then redis.call('PEXPIRE', roll, ttl, 'NX') end
      end
    end
  end
  return {0, busy, first_busy}
end

--@include next_token.lua

-- Counters first, locks last: a failure here leaves no lock set. The counters counted before a
-- refused one keep their new values: a skipped token is harmless.
local first = nil
for i = 1, n do
  local fence = KEYS[2 * i]
  local token, bad = next_token(fence)
  if not token then return {-1, bad, fence} end
  if first == nil then first = token end
end
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
end
return {1, first}
