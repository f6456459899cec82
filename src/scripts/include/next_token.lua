-- next_token(key): included by the build (cmake/embed_scripts.cmake replaces a script's line
-- "--@include next_token.lua" with this file) into every script that counts a fencing token:
-- Redis runs each script alone, so scripts cannot share code at run time.
--
-- The next fencing token from the counter at `key`, or nil and why the key holds no counter.
-- A counter counts on from 0 to 2^53 - 2: every token is then at least 1 and exact in Lua's
-- numbers (the last, 2^53 - 1, leaves a counter that gives no more). A missing (or zero)
-- counter, after a restart without persistence or a failover to a replica that lacked it, is
-- seeded from the server's clock in microseconds, so tokens keep rising after data loss; INCR
-- answers 1 only then (a seeded counter is far above), which saves an EXISTS. A negative or
-- larger one was written by hand (INCR would answer no token, or one Lua rounds, so that two
-- holders could get the same): put back, and refused.
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
