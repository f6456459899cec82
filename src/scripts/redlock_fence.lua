-- Write a Redlock's chosen fencing token back to one node: counter = max(counter, token).
-- Sent to every node after a majority took the lock with counters that disagree (fewer than a
-- majority answered the chosen token itself); the acquisition counts only once a majority
-- confirmed, so any later majority meets at least one node that already knows the token (unless
-- that node lost its counter since). When a majority answered the token, it is sent, unawaited,
-- only to the nodes behind it.
-- KEYS[1]  the fencing counter     P{N}:fence
-- ARGV[1]  the chosen token
-- Reply:   1  the counter holds the token or more;  0  it holds no counter (a value of
--             another type, or not a whole number from 0 to 2^53 - 1; redlock_acquire.lua
--             refuses these, and 2^53 - 1 too, which can give no next token): left as it is,
--             for the next acquisition there to name
--@include counter_of.lua
local text = redis.pcall('GET', KEYS[1])
if type(text) == 'table' then return 0 end
local counter = 0
if text then
  counter = counter_of(text)
  if not counter then return 0 end
end
if tonumber(ARGV[1]) > counter then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
