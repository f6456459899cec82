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

-- The next fencing token from the counter at `key`, or nil and why the key holds no counter.
-- A counter counts on from 0 to 2^53 - 2: every token is then at least 1 and exact in Lua's
-- numbers (the last, 2^53 - 1, leaves a counter that gives no more). A missing (or zero)
-- counter, after a restart without persistence or a failover to a replica that lacked it, is
-- seeded from the server's clock in microseconds, so tokens keep rising after data loss; INCR
-- answers 1 only then (a seeded counter is far above), which saves an EXISTS. A negative or
-- larger one was written by hand (INCR would answer no token, or one Lua rounds, so that two
-- holders could get the same): put back, and refused. The same function is in every script
-- that counts a token (scripts cannot share code).
local function next_token(key)
  local token = redis.pcall('INCR', key)
  if type(token) == 'table' then
    if string.find(token.err, 'WRONGTYPE', 1, true) then return nil, redis.call('TYPE', key)['ok'] end
    -- Not about the value (an ACL that denies INCR, OOM under maxmemory): the server's own error.
    if not (string.find(token.err, 'not an integer', 1, true) or string.find(token.err, 'overflow', 1, true)) then
      error(token)
    end
    return nil, 'string (not a counter)'
  end
  if token == 1 then
    -- An ACL without TIME: the counter goes back to missing before the error, so that the next
    -- try seeds it too instead of counting on from the 1 this INCR wrote.
    local t = redis.pcall('TIME')
    if t.err then
      redis.call('DEL', key)
      error(t)
    end
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
    token = redis.call('INCR', key)
  end
  if token < 1 or token > 9007199254740991 then
    -- pcall: an ACL narrower than the README's (which allows DECR) still gets the refusal.
    redis.pcall('DECR', key)
    return nil, 'string (not a counter)'
  end
  return token
end

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
