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
--
-- A GET per lock key both finds it free and checks its type: TYPE is asked only when the GET
-- fails (issue #6: Redis calls per EVALSHA cost throughput).
local n = #KEYS / 2
local busy = nil
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return {-1, redis.call('TYPE', key)['ok'], key} end
  if v and busy == nil then busy = redis.call('PTTL', key) end
end
if busy ~= nil then return {0, busy} end
-- Counters first (seeded from the server's clock in microseconds when missing, as
-- mutex_acquire does), locks last: a failure here leaves no lock set. INCR answers 1 only on a
-- missing counter (a seeded one is far above), which saves an EXISTS per lock.
local first = nil
local now = nil
for i = 1, n do
  local fence = KEYS[2 * i]
  local token = redis.call('INCR', fence)
  if token == 1 then
    now = now or redis.call('TIME')
    redis.call('SET', fence, now[1] .. string.format('%06d', tonumber(now[2])))
    token = redis.call('INCR', fence)
  end
  if first == nil then first = token end
end
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
end
return {1, first}
