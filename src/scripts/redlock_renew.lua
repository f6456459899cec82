#!lua flags=allow-oom
-- Renew a Redlock hold on ONE node: extend it where this owner holds it, and set it again
-- (NX) where the key is gone, e.g. after the node restarted empty.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- KEYS[3]  the fencing counter     P{N}:fence
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds
-- ARGV[3]  the hold's fencing token
-- Reply:   1  renewed;  3  the key was missing and is set again;  0  held by another owner
--@include counter_of.lua
local cur = redis.pcall('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur ~= false then return 0 end
-- Never re-create a hold this owner released (marker "owner", or the tombstone "-owner" that
-- redlock_release.lua leaves where the key was already gone): a renewal that crosses release()
-- on the wire would otherwise resurrect it here.
local marker = redis.pcall('GET', KEYS[2])
if marker == ARGV[1] or marker == '-' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
-- The node may have lost its counter with the rest of its data: teach it this hold's token. A
-- counter that is no counter (redlock_acquire.lua refuses it) is left as it is.
local text = redis.pcall('GET', KEYS[3])
local counter = not text and 0 or type(text) == 'string' and counter_of(text)
if counter and tonumber(ARGV[3]) > counter then redis.call('SET', KEYS[3], ARGV[3]) end
return 3
