-- Take a MultiLock: every lock of the set, or none of them, in one atomic step.
-- Each lock uses exactly the Mutex layout, so a MultiLock over {a,b} excludes a Mutex on a.
-- KEYS     lock1, fence1, lock2, fence2, ...   (P{N} and P{N}:fence, names sorted)
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- Reply:   {1, token}  acquired; token is the new fencing token of the FIRST lock. Every
--                      lock's own counter was incremented too: while held, GET P{N}:fence is
--                      the token of lock N.
--          {0, pttl}   some lock is held; pttl is the remaining TTL of the first held one
--                      (-1: no expiry)
--          {-1, type, key}  that lock key holds a value of another type
-- Nothing is written unless every lock is free, so no MultiLock ever holds a part of its set
-- and two MultiLocks over overlapping sets cannot deadlock.
local n = #KEYS / 2
local busy = nil
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' then
    if kind ~= 'string' then return {-1, kind, key} end
    if busy == nil then busy = redis.call('PTTL', key) end
  end
end
if busy ~= nil then return {0, busy} end
-- Counters first (seeded from the server's clock in microseconds when missing, as
-- mutex_acquire does), locks last: a failure here leaves no lock set.
local first = nil
for i = 1, n do
  local fence = KEYS[2 * i]
  if redis.call('EXISTS', fence) == 0 then
    local now = redis.call('TIME')
    redis.call('SET', fence, now[1] .. string.format('%06d', tonumber(now[2])))
  end
  local token = redis.call('INCR', fence)
  if first == nil then first = token end
end
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
end
return {1, first}
