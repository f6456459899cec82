#!lua flags=allow-oom
-- Release a FairLock and hand it straight to the waiter at the head of the queue: the lock key
-- takes the head's owner token and lease TTL, the fence counts one acquisition, the head leaves
-- the queue and is told 'granted <fencing token> <its id>' on its channel. The head needs no try
-- of its own (one round trip less per handoff); nobody else is woken.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- KEYS[3]  the queue               P{N}:queue
-- KEYS[4]  the waiters' deadlines  P{N}:timeouts
-- KEYS[5]  the fencing counter     P{N}:fence
-- KEYS[6]  the waiters' leases     P{N}:grant     hash: waiter id -> lease TTL ms
-- ARGV[1]  owner token
-- ARGV[2]  prefix of the waiters' channels  P{N}:ch:
-- ARGV[3]  how long the release marker lives, in milliseconds
-- Reply:   1  released (and handed over when a live waiter was queued, unless its stored lease
--             or the fencing counter is unusable: the waiter is then woken to try itself)
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, taken over, or never held)
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights still
-- releases (the head then finds the lock its own at its recheck: fair_acquire.lua).
-- The handover below is repeated in fair_dequeue.lua (scripts cannot share code).
-- The release marker is written last, once nothing can fail any more: Redis keeps what a
-- script wrote before an error, and a marker left by a release that then failed (an INCR an ACL
-- denies; once an INCR on a counter that was no integer) made its retry answer 2 while the lock
-- was still held. A counter that is no counter, or a stored lease that is no TTL, no longer
-- fails the release: the head is woken instead, and its own try names what is wrong.

--@include next_token.lua

if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  local function channel_of(id) return ARGV[2] .. (string.match(id, '^%x+@(.+):%d+$') or id) end
  local head = false
  if redis.call('TYPE', KEYS[3])['ok'] == 'list' and redis.call('TYPE', KEYS[4])['ok'] == 'zset' then
    -- Skip heads whose place expired (dead waiters): the first live one gets the lock.
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    head = redis.call('LINDEX', KEYS[3], 0)
    while head do
      local deadline = redis.call('ZSCORE', KEYS[4], head)
      if deadline and tonumber(deadline) > now then break end
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], head)
      redis.pcall('HDEL', KEYS[6], head)
      head = redis.call('LINDEX', KEYS[3], 0)
    end
    -- The head's lease as fair_acquire.lua stored it: a TTL in ms, at most 12 digits (SET PX
    -- refuses what overflows), so that the SET below cannot fail after the count.
    local ttl = head and redis.pcall('HGET', KEYS[6], head)
    ttl = type(ttl) == 'string' and #ttl <= 12 and string.match(ttl, '^[1-9]%d*$') and ttl
    -- Exactly an acquisition (fair_acquire.lua): count, set.
    local token = ttl and next_token(KEYS[5])
    if token then
      redis.call('SET', KEYS[1], head, 'PX', ttl)
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], head)
      redis.call('HDEL', KEYS[6], head)
      redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
      -- '%d': a Lua number concatenates as %.14g, which writes a 16-digit token as 1.7e+15.
      redis.pcall('PUBLISH', channel_of(head), 'granted ' .. string.format('%d', token) .. ' ' .. head)
      return 1
    end
  end
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  -- A live head whose stored lease is missing (or whose token could not be counted) is woken
  -- and takes the lock with its own try.
  if head then redis.pcall('PUBLISH', channel_of(head), 'released ' .. head) end
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
