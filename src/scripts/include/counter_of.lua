-- counter_of(text): included by the build (cmake/embed_scripts.cmake) into the scripts that read
-- a fencing counter without counting it. The number the text of a counter holds, or nil when it
-- holds none a script may take: '0', or a decimal whole number without sign or leading zeros up
-- to 2^53 - 1, the last token next_token.lua gives (exact in Lua's numbers). Anything else was
-- written by hand ('-5', '1e5', '007', past 2^53 - 1) and is left as it is.
local function counter_of(text)
  if text == '0' then return 0 end
  if type(text) ~= 'string' or #text > 16 or not string.match(text, '^[1-9]%d*$') then return nil end
  local n = tonumber(text)
  if n > 9007199254740991 then return nil end
  return n
end
