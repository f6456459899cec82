#!lua flags=allow-oom
-- Renew or extend a Mutex lease, only while this owner still holds it.
-- KEYS[1]  the lock key            P{N}
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds
-- Reply:   1  renewed;  0  not held by this owner (the lease is lost)
-- Never re-creates a missing key: a renewal racing with unlock() cannot resurrect the lock.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
