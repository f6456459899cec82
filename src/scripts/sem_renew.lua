#!lua flags=allow-oom
-- Renew or extend the permits of one Semaphore acquisition, only while all are still held.
-- KEYS[1]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[2]  P{N}           hash: kind = 'Semaphore', the name's claim (sem_acquire.lua); optional
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds
-- ARGV[3]  k, the number of permits of this acquisition ("<owner>#1" .. "<owner>#k")
-- Reply:   1  renewed;  0  not held any more (the lease is lost; what is left of it is removed)
-- Never re-creates a permit, and never checks the limit: a lowered limit revokes nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The claim P{N} lives as long as the longest live permit (sem_acquire.lua), and goes with the
-- last one. Only a Semaphore's claim: PEXPIRE and DEL look at no type, and another kind's lock
-- under the name is not this holder's to keep alive or remove.
local function claim_to_last()
  if not KEYS[2] or redis.pcall('HGET', KEYS[2], 'kind') ~= 'Semaphore' then return end
  local last = redis.pcall('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if type(last) == 'table' and last[2] and tonumber(last[2]) > now then
    redis.call('PEXPIRE', KEYS[2], string.format('%d', tonumber(last[2]) - now))
  else
    redis.call('DEL', KEYS[2])
  end
end
local k = tonumber(ARGV[3])
for i = 1, k do
  local s = redis.pcall('ZSCORE', KEYS[1], ARGV[1] .. '#' .. i)
  if type(s) ~= 'string' or tonumber(s) <= now then
    for j = 1, k do redis.pcall('ZREM', KEYS[1], ARGV[1] .. '#' .. j) end
    claim_to_last()
    return 0
  end
end
local ttl = tonumber(ARGV[2])
-- In calls of at most 1000 permits, as sem_acquire.lua adds them (unpack() limit).
for from = 1, k, 1000 do
  local entries = {}
  for i = from, math.min(k, from + 999) do
    entries[#entries + 1] = now + ttl
    entries[#entries + 1] = ARGV[1] .. '#' .. i
  end
  redis.call('ZADD', KEYS[1], 'XX', unpack(entries))
end
-- GT: only ever lengthens the zset's life (it must outlive its longest permit). It always has a
-- TTL here: sem_acquire gives it one whenever it adds to it.
redis.call('PEXPIRE', KEYS[1], ttl, 'GT')
claim_to_last()
return 1
