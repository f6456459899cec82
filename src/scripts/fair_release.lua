-- Release a FairLock: compare-and-delete, then wake the waiter at the head of the queue, and
-- only that one (each waiter listens on its own channel: no thundering herd).
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- KEYS[3]  the queue               P{N}:queue
-- KEYS[4]  the waiters' deadlines  P{N}:timeouts
-- ARGV[1]  owner token
-- ARGV[2]  prefix of the waiters' channels  P{N}:ch:
-- ARGV[3]  how long the release marker lives, in milliseconds
-- Reply:   1  released
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, taken over, or never held)
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights still
-- releases (the head then notices at its recheck).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  if redis.call('TYPE', KEYS[3])['ok'] == 'list' and redis.call('TYPE', KEYS[4])['ok'] == 'zset' then
    -- Skip heads whose place expired (dead waiters): wake the first live one.
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local head = redis.call('LINDEX', KEYS[3], 0)
    while head do
      local deadline = redis.call('ZSCORE', KEYS[4], head)
      if deadline and tonumber(deadline) > now then break end
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], head)
      head = redis.call('LINDEX', KEYS[3], 0)
    end
    if head then redis.pcall('PUBLISH', ARGV[2] .. head, 'released') end
  end
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
