-- Write a Redlock's chosen fencing token back to one node: counter = max(counter, token).
-- Sent to every node after a majority took the lock with counters that disagree (fewer than a
-- majority answered the chosen token itself); the acquisition counts only once a majority
-- confirmed, so any later majority meets at least one node that already knows the token (unless
-- that node lost its counter since). When a majority answered the token, it is sent, unawaited,
-- only to the nodes behind it.
-- KEYS[1]  the fencing counter     P{N}:fence
-- ARGV[1]  the chosen token
-- Reply:   1
local counter = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local token = tonumber(ARGV[1])
if token > counter then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
