-- rlock: every operation on one lock, in one script so that all share the
-- same helpers and a single SHA is cached.
--
-- KEYS (all share the hash tag {NAME}, so the script is valid on Cluster):
--   1 h  ZSET token -> expiry ms   exclusive / semaphore holders
--   2 s  ZSET token -> expiry ms   shared holders
--   3 q  ZSET token -> arrival seq every waiter, in arrival order
--   4 x  ZSET token -> arrival seq the exclusive waiters (subset of q)
--   5 l  ZSET token -> lease ms    waiter leases
--   6 i  HASH token -> record      "fence\nsince_ms\nmode\nttl_ms\nblob" of
--                                   holders and waiters (fence 0 for waiters)
--   7 m  HASH                      limit, seq (arrival counter)
--   8 f  STRING                    fencing counter: the only key that stays
--   9 a  STRING                    last forced release (audit), 24 h:
--                                   netstrings now, audit blob, id, record...
-- ARGV[1] is the operation; the rest depend on it (see each function).
-- Wake lists are KEYS-prefix .. ":w:" .. token: one per waiter, so a release
-- wakes exactly the waiters who can proceed (BLPOP on the client side).
--
-- Time is the server's (TIME); the client's clock is never used.

local H, S, Q, X, L, I, M, F, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
  KEYS[8], KEYS[9]
local op = ARGV[1]

if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function wake_key(token) return string.sub(Q, 1, -2) .. 'w:' .. token end

-- Refuse to touch keys of another type: a foreign key at our name is an
-- error, never something to overwrite. Every call pays for this, so the full
-- check (nine TYPE calls, a third of a cheap call's cost) runs only when the
-- meta hash is absent, i.e. when the lock is free: while M lives, the other
-- keys are ours, and a foreign write to one of them since then still fails
-- the script with Redis' own WRONGTYPE error.
local function foreign(key, kind)
  local actual = redis.call('TYPE', key).ok
  if actual ~= 'none' and actual ~= kind then
    return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. actual ..
      ', not part of an rlock lock')
  end
end
local meta_type = redis.call('TYPE', M).ok
if meta_type ~= 'hash' then
  local expected = { { H, 'zset' }, { S, 'zset' }, { Q, 'zset' }, { X, 'zset' }, { L, 'zset' },
    { I, 'hash' }, { M, 'hash' }, { F, 'string' }, { A, 'string' } }
  for _, pair in ipairs(expected) do
    local err = foreign(pair[1], pair[2])
    if err then return err end
  end
end

-- Remove holders whose lease ran out and waiters whose lease ran out.
-- Returns true when something was removed (a waiter may now proceed).
local function purge()
  local removed = false
  -- ZCOUNT first: it is the cheap common answer (nothing expired), where an
  -- empty ZRANGEBYSCORE still builds a reply table.
  for _, key in ipairs({ H, S }) do
    local dead = {}
    if redis.call('ZCOUNT', key, '-inf', now) > 0 then
      dead = redis.call('ZRANGEBYSCORE', key, '-inf', now)
    end
    for _, token in ipairs(dead) do
      redis.call('HDEL', I, token)
      removed = true
    end
    if #dead > 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', now) end
  end
  local gone = {}
  if redis.call('ZCOUNT', L, '-inf', now) > 0 then gone = redis.call('ZRANGEBYSCORE', L, '-inf', now) end
  for _, token in ipairs(gone) do
    redis.call('ZREM', Q, token)
    redis.call('ZREM', X, token)
    redis.call('HDEL', I, token)
    redis.call('DEL', wake_key(token))
    removed = true
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', L, '-inf', now) end
  return removed
end

-- Every key but the fencing counter expires by itself no earlier than the
-- last lease it records, so a crashed holder or waiter leaves nothing
-- behind. Expiries are extended only when needed, after a PTTL (a read: a
-- PEXPIREAT is a write and costs twice as much), and shortened only by tidy,
-- so a key may outlive its last lease a little, never the other way round.

-- cover(key, at): key lives at least until `at` (a missing key is left alone).
local function cover(key, at)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and now + left < at) then redis.call('PEXPIREAT', key, at) end
end

-- A holder's lease in `set` now ends at `at`.
local function cover_holder(set, at)
  cover(set, at)
  cover(I, at)
  cover(M, at)
end

-- A waiter's lease now ends at `at`; `joined` when it just entered the queue.
-- Q, X and L always get the same expiry, so that they vanish together: a
-- waiter left in Q without its lease in L could never be purged. They are
-- extended a whole lease beyond `at`, so the re-checks of a long queue (one
-- per waiter per second) mostly find nothing to write.
local function cover_queue(at, joined)
  local left = redis.call('PTTL', L)
  if joined or left < 0 or now + left < at then
    local to = at + (at - now)
    if left > 0 and now + left > to then to = now + left end
    redis.call('PEXPIREAT', Q, to)
    redis.call('PEXPIREAT', X, to)
    redis.call('PEXPIREAT', L, to)
    cover(I, to)
    cover(M, to)
  end
end

-- After a removal: I and M go at once if nobody holds or waits any more, and
-- otherwise live no longer than the longest-lived of H, S and L (whose
-- expiries bound their members' leases), not until the lease of someone who
-- already left.
local function tidy()
  local latest, forever = 0, false
  for _, key in ipairs({ H, S, L }) do
    local left = redis.call('PTTL', key)
    if left == -1 then forever = true elseif left > latest then latest = left end
  end
  if forever then return end
  if latest <= 0 then
    if redis.call('EXISTS', I, M) > 0 then redis.call('DEL', I, M) end
    return
  end
  if redis.call('PTTL', M) > latest then
    redis.call('PEXPIREAT', I, now + latest)
    redis.call('PEXPIREAT', M, now + latest)
  end
end

local cached_limit
local function limit_of()
  if not cached_limit then cached_limit = tonumber(redis.call('HGET', M, 'limit') or '1') end
  return cached_limit
end

-- Can this waiter (or a newcomer, when rank is the queue length) take the
-- lock now without overtaking anyone queued before it?
local function grantable(mode, rank, seq)
  if mode == 'shared' then
    if redis.call('ZCARD', H) > 0 then return false end
    -- No exclusive waiter may be queued ahead (no starvation of writers).
    local ahead = seq and redis.call('ZCOUNT', X, '-inf', '(' .. seq) or redis.call('ZCARD', X)
    return ahead == 0
  end
  if redis.call('ZCARD', S) > 0 then return false end
  return rank < limit_of() - redis.call('ZCARD', H)
end

-- Push a wake-up to each waiter who can now proceed, and to no one else.
local function wake_ready()
  local head = redis.call('ZRANGE', Q, 0, 0)
  if #head == 0 then return end
  local ready
  if redis.call('ZSCORE', X, head[1]) == false then
    if redis.call('ZCARD', H) > 0 then return end
    -- A shared waiter at the head: it and every shared waiter up to the first
    -- exclusive one can go together.
    local first_x = redis.call('ZRANGE', X, 0, 0, 'WITHSCORES')
    local bound = #first_x > 0 and ('(' .. first_x[2]) or '+inf'
    ready = redis.call('ZRANGEBYSCORE', Q, '-inf', bound)
  else
    if redis.call('ZCARD', S) > 0 then return end
    local free = limit_of() - redis.call('ZCARD', H)
    if free <= 0 then return end
    ready = free == 1 and { head[1] } or redis.call('ZRANGE', Q, 0, free - 1)
  end
  -- A wake-up lives as long as the waiter's lease: a dead waiter's is purged
  -- with it, or expires.
  for _, token in ipairs(ready) do
    local key = wake_key(token)
    redis.call('LPUSH', key, '1')
    redis.call('PEXPIREAT', key, tonumber(redis.call('ZSCORE', L, token) or now + 1000))
  end
end

local function holder_set(token)
  if redis.call('ZSCORE', H, token) then return H end
  if redis.call('ZSCORE', S, token) then return S end
  return nil
end

local function fence_of(token)
  local record = redis.call('HGET', I, token)
  if not record then return 0 end
  return tonumber(string.match(record, '^(%d+)\n'))
end

local function first_holder()
  for _, key in ipairs({ H, S }) do
    local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #top > 0 then
      return { redis.call('HGET', I, top[1]) or '', tonumber(top[2]) - now }
    end
  end
  return { '', 0 }
end

-- acquire TOKEN MODE LIMIT TTL_MS BLOB ENQUEUE LEASE_MS
-- Returns {1, fence} when held (also when this token already held it: a
-- retried acquire is idempotent), {0, position, holder_record, holder_ttl}
-- when busy or queued (position 0 = not queued), {-1, stored_limit} when the
-- lock is used with another --limit.
local function acquire()
  local token, mode, limit, ttl, blob = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]),
    ARGV[6]
  local enqueue, lease = ARGV[7] == '1', tonumber(ARGV[8])
  local stored = redis.call('HGET', M, 'limit')
  local purged = purge()
  if stored and tonumber(stored) ~= limit then
    -- M may outlive the last lease a little (see cover): a limit nobody
    -- uses any more is forgotten, a live one is an error.
    if redis.call('EXISTS', H, S, L) > 0 then
      if purged then wake_ready() end
      return { -1, tonumber(stored) }
    end
    redis.call('DEL', I, M)
    stored = nil
  end
  if not stored then redis.call('HSET', M, 'limit', limit) end
  cached_limit = limit
  if purged then wake_ready() end

  -- A queued token holds nothing (a grant takes it out of the queue), so the
  -- common case, a waiter re-checking, needs no holder lookup.
  local rank = redis.call('ZRANK', Q, token)
  local queued = rank ~= false
  local seq
  if queued then
    -- Only a shared waiter needs its arrival number (see grantable).
    if mode == 'shared' then seq = redis.call('ZSCORE', Q, token) end
  else
    local held = holder_set(token)
    if held then
      redis.call('ZADD', held, now + ttl, token)
      cover_holder(held, now + ttl)
      return { 1, fence_of(token) }
    end
    rank = redis.call('ZCARD', Q)
  end
  if grantable(mode, rank, seq) then
    if queued then
      redis.call('ZREM', Q, token)
      if mode ~= 'shared' then redis.call('ZREM', X, token) end
      redis.call('ZREM', L, token)
      redis.call('DEL', wake_key(token))
    end
    local fence = redis.call('INCR', F)
    local set = mode == 'shared' and S or H
    redis.call('ZADD', set, now + ttl, token)
    redis.call('HSET', I, token, fence .. '\n' .. now .. '\n' .. mode .. '\n' .. ttl .. '\n' .. blob)
    cover_holder(set, now + ttl)
    return { 1, fence }
  end

  local holder = first_holder()
  if not enqueue then
    if queued then
      -- A waiter that gives up leaves the queue; those behind may now go.
      redis.call('ZREM', Q, token)
      redis.call('ZREM', X, token)
      redis.call('ZREM', L, token)
      redis.call('HDEL', I, token)
      redis.call('DEL', wake_key(token))
      wake_ready()
      tidy()
    end
    return { 0, 0, holder[1], holder[2] }
  end
  if not queued then
    seq = redis.call('HINCRBY', M, 'seq', 1)
    redis.call('ZADD', Q, seq, token)
    if mode ~= 'shared' then redis.call('ZADD', X, seq, token) end
    redis.call('HSET', I, token, '0\n' .. now .. '\n' .. mode .. '\n' .. ttl .. '\n' .. blob)
  end
  redis.call('ZADD', L, now + lease, token)
  cover_queue(now + lease, not queued)
  return { 0, rank + 1, holder[1], holder[2] }
end

-- renew TOKEN TTL_MS -> the new lease in ms, or 0 when the token does not
-- hold the lock. TTL_MS 0 renews for the TTL the lock was acquired with.
local function renew()
  local token, ttl = ARGV[2], tonumber(ARGV[3])
  if purge() then wake_ready() end
  local held = holder_set(token)
  if not held then
    tidy()
    return 0
  end
  if ttl <= 0 then
    ttl = tonumber(string.match(redis.call('HGET', I, token) or '', '^%d+\n%d+\n%a+\n(%d+)\n'))
      or 30000
  end
  redis.call('ZADD', held, now + ttl, token)
  cover_holder(held, now + ttl)
  return ttl
end

-- release TOKEN -> 1 released (or left the queue), 0 not held by this token.
-- A retried release is harmless: it answers 0 and changes nothing.
local function release()
  local token = ARGV[2]
  purge()
  local held = holder_set(token)
  local found = held ~= nil
  if held then
    redis.call('ZREM', held, token)
    redis.call('HDEL', I, token)
  elseif redis.call('ZSCORE', Q, token) then
    redis.call('ZREM', Q, token)
    redis.call('ZREM', X, token)
    redis.call('ZREM', L, token)
    redis.call('HDEL', I, token)
    found = true
  end
  redis.call('DEL', wake_key(token))
  wake_ready()
  tidy()
  return found and 1 or 0
end

-- force ID AUDIT_BLOB -> {now, id1, record1, id2, record2, ...} of the
-- evicted holders. ID '' evicts every holder; otherwise the holder whose short id
-- (first 8 hex digits of sha1(token)) is ID. The audit record stays 24 h.
local function force()
  local id, audit = ARGV[2], ARGV[3]
  purge()
  local evicted = {}
  for _, key in ipairs({ H, S }) do
    for _, token in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      local short = string.sub(redis.sha1hex(token), 1, 8)
      if id == '' or id == short then
        table.insert(evicted, short)
        table.insert(evicted, redis.call('HGET', I, token) or '')
        redis.call('ZREM', key, token)
        redis.call('HDEL', I, token)
      end
    end
  end
  if #evicted > 0 then
    -- Netstrings ("len:bytes"), since records may hold any byte.
    local parts = { tostring(now), audit }
    for _, v in ipairs(evicted) do table.insert(parts, v) end
    for k, v in ipairs(parts) do parts[k] = #v .. ':' .. v end
    redis.call('SET', A, table.concat(parts), 'PX', 24 * 3600 * 1000)
  end
  wake_ready()
  tidy()
  table.insert(evicted, 1, now)
  return evicted
end

-- status -> {now, limit, last_fence, holders, waiters, audit}; read-only, so
-- it also works on a replica. holders: {id, mode_key, ttl_ms, record, ...};
-- waiters in queue order: {id, lease_ms, record, ...}.
local function status()
  local holders = {}
  for _, key in ipairs({ H, S }) do
    local live = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf', 'WITHSCORES')
    for k = 1, #live, 2 do
      table.insert(holders, string.sub(redis.sha1hex(live[k]), 1, 8))
      table.insert(holders, tonumber(live[k + 1]) - now)
      table.insert(holders, redis.call('HGET', I, live[k]) or '')
    end
  end
  local waiters = {}
  for _, token in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
    local lease = tonumber(redis.call('ZSCORE', L, token) or '0')
    if lease > now then
      table.insert(waiters, string.sub(redis.sha1hex(token), 1, 8))
      table.insert(waiters, lease - now)
      table.insert(waiters, redis.call('HGET', I, token) or '')
    end
  end
  return { now, limit_of(), tonumber(redis.call('GET', F) or '0'), holders, waiters,
    redis.call('GET', A) or '' }
end

if op == 'acquire' then return acquire() end
if op == 'renew' then return renew() end
if op == 'release' then return release() end
if op == 'force' then return force() end
if op == 'status' then return status() end
return redis.error_reply('ERR rlock: unknown operation ' .. tostring(op))
