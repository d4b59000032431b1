-- rlock: every operation on one lock, in one script so that all share the
-- same helpers and a single SHA is cached.
--
-- Tokens are never stored: the client sends its token, and the script keeps
-- only HASH = sha1hex(token) (40 hex digits). Whoever can read the keyspace
-- then learns nothing that renews or releases a lock, or names a wake list
-- it could push to. SHA-1 because it is the only hash Lua in Redis has; it
-- suffices, since a token is 128 random bits: recovering one from its hash
-- is a preimage search over 2^128 candidates, which SHA-1's weakness
-- (collisions between inputs the attacker chooses) does not shorten. The
-- short id that status shows is the first 8 hex digits of HASH. Below, a
-- variable named `token` always holds such a hash, never a token.
--
-- KEYS (all share the hash tag {NAME}, so the script is valid on Cluster):
--   1 h  ZSET hash -> expiry ms   exclusive / semaphore holders
--   2 s  ZSET hash -> expiry ms   shared holders
--   3 q  ZSET hash -> arrival seq every waiter, in arrival order
--   4 x  ZSET hash -> arrival seq the exclusive waiters (subset of q)
--   5 l  ZSET hash -> lease ms    waiter leases
--   6 i  HASH hash -> record      "fence\nsince_ms\nmode\nttl_ms\nblob" of
--                                  holders and waiters (fence 0 for waiters)
--   7 m  HASH                     limit, seq (arrival counter), purge_at
--                                  (no lease in h, s or l ends before it:
--                                  a lower bound that lets most calls skip
--                                  the purge; see purge), and p:HASH
--                                  "seq:since_ms", a quorum waiter's place
--                                  (see place_back)
--   8 f  STRING                   the last fence handed out, in decimal: the
--                                  only key that stays
--   9 a  STRING                   the last forced releases (audit), newest
--                                  first, at most 20 and 24 h: netstrings of
--                                  entries, each netstrings of now, audit
--                                  blob, ACL user, id, record, id, record...
-- ARGV[1] is the operation; the rest depend on it (see each function).
-- Wake lists are KEYS-prefix .. ":w:" .. HASH: one per waiter. Whatever
-- frees a place grants the lock to the waiters who can proceed (and to no
-- one else) and pushes each one's fence onto its list (wake_ready); the
-- waiter's BLPOP returns it, and the acquire it pipelined behind the BLPOP
-- confirms the grant (see GRANT_MS).
--
-- Time is the server's (TIME); the client's clock is never used.
--
-- Fences never go backwards: the next one is max(f + 1, TIME in µs), so a
-- Redis restarted without data, or a promoted replica that missed the last
-- grants, still hands out a fence above every earlier one, as long as its
-- clock is not behind the old master's by more than the time between two
-- grants. A fence (~1.8e15 today) is below 2^53, exact as a Lua double, and
-- is written with %.0f (tostring would give exponent form). Calling TIME
-- and then writing is allowed because Redis 7 replicates a script by its
-- effects: replicas receive the SET of the value, not the script.

local H, S, Q, X, L, I, M, F, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
  KEYS[8], KEYS[9]
local op = ARGV[1]

if redis.replicate_commands then redis.replicate_commands() end
-- A command this server does not have (rename-command): said so, where
-- Redis' words would name none, or blame the ACL.
local function unavailable(command)
  return redis.error_reply('ERR rlock: this server has no \'' .. string.lower(command) ..
    '\' command (renamed or disabled), which rlock needs: nothing was changed ' ..
    '(see REDIS REQUIREMENTS in rlock(1))')
end
-- pcall: a user without +time would get Redis' words, which name no
-- command ("can't run this command or subcommand").
local t = redis.pcall('TIME')
if t.err then
  -- Redis: "Unknown Redis command called from script", Valkey: "Unknown
  -- command called from script".
  if string.find(t.err, 'command called from script', 1, true) and
    string.find(t.err, 'Unknown', 1, true) then return unavailable('TIME') end
  return redis.error_reply('NOPERM this user has no permissions to run the \'time\' command, ' ..
    'which rlock needs: nothing was changed (see Minimum ACL in rlock(1))')
end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function wake_key(hash) return string.sub(Q, 1, -2) .. 'w:' .. hash end

-- This server's uptime in ms, as little as it may be: INFO's
-- uptime_in_seconds is the current second less the second the server
-- started (both rounded down), so a server that says 2 has been up for
-- more than 1 s only. A younger one never counts as old enough.
local server_info
local function info_server()
  if not server_info then server_info = redis.call('INFO', 'server') end
  return server_info
end
local function uptime_ms()
  local seconds = tonumber(string.match(info_server(), 'uptime_in_seconds:(%d+)') or '0')
  return math.max(0, seconds - 1) * 1000
end

-- This server's role (INFO replication): 'master', or 'slave' for a
-- read-only replica, which no quorum member may be (it cannot grant); a
-- replica configured to take writes (replica-read-only no) can, and is
-- 'writable-replica'.
local function role()
  local info = redis.call('INFO', 'replication')
  local name = string.match(info, 'role:(%a+)') or ''
  if name == 'slave' and string.match(info, 'slave_read_only:0') then return 'writable-replica' end
  return name
end

-- uptime -> {uptime_ms(), role(), run_id}: a quorum listing asks each
-- member whether it may have lost locks to a restart, whether it can take a
-- lock at all, and which server it is (two members that are one server
-- would vote twice); keys and time unused.
if op == 'uptime' then
  return { uptime_ms(), role(), string.match(info_server(), 'run_id:(%x+)') or '' }
end

-- memory -> {maxmemory, maxmemory_policy}: whether this server may evict a
-- lock's keys (every one but F has an expiry, so volatile-* policies may
-- too): `run` warns once (keys and time unused).
if op == 'memory' then
  local info = redis.call('INFO', 'memory')
  return { tonumber(string.match(info, 'maxmemory:(%d+)') or '0'),
    string.match(info, 'maxmemory_policy:([%w%-]+)') or '' }
end

-- An ACL refusal stops a script at the refused call, and Redis keeps what
-- the script wrote before it: a lock released although the release
-- "failed", a waiter queued without its record. So before an operation
-- writes, the script asks the ACL (redis.acl_check_cmd, Redis 7) about the
-- commands it may call once it has written: DEL with the keys it may write
-- (write access to each), then each command. A refusal then comes before
-- any write, and names what is missing. Each check costs about a sixth of
-- a redis.call: a holder's acquire and a renewal, which write only their
-- own lease, its expiries and purge_at, ask about the six commands they
-- call (LEASE_COMMANDS); every other write asks about all of them, and
-- EXISTS with every key (read access to each).
-- The key a command is asked about: zsets H, hashes I, strings F, LPUSH a
-- wake list, INFO its section.
local function key_for(command)
  local first = string.sub(command, 1, 1)
  if command == 'LPUSH' then return wake_key(string.rep('0', 40)) end
  if command == 'INFO' then return 'server' end
  if first == 'Z' then return H end
  if first == 'H' then return I end
  if command == 'GET' or command == 'SET' then return F end
  return H
end

local function first_refused(keys, commands)
  if not redis.acl_check_cmd('DEL', unpack(keys)) then return 'DEL' end
  for _, command in ipairs(commands) do
    -- With the key it is used on (one per kind): an ACL selector may allow
    -- a command on other keys only.
    if not redis.acl_check_cmd(command, key_for(command)) then return command end
  end
end
local function acl_refusal(keys, commands)
  -- acl_check_cmd raises an error for a command the server does not have:
  -- the loop runs under one pcall, and only then is each command tried.
  local checked, missing = pcall(first_refused, keys, commands)
  if not checked then
    for _, command in ipairs({ 'DEL', unpack(commands) }) do
      if not pcall(redis.acl_check_cmd, command, keys[1]) then return unavailable(command) end
    end
    return redis.error_reply(type(missing) == 'table' and missing.err or tostring(missing))
  end
  if missing then
    return redis.error_reply('NOPERM this user has no permissions to run the \'' ..
      string.lower(missing) .. '\' command on the keys of this lock, which rlock needs: ' ..
      'nothing was changed (see Minimum ACL in rlock(1))')
  end
end
local LEASE_COMMANDS = { 'TYPE', 'ZSCORE', 'ZADD', 'PEXPIREAT', 'HGET', 'HSET' }

-- Every key but the fencing counter expires by itself no earlier than the
-- last lease it records, so a crashed holder or waiter leaves nothing
-- behind. Every run that may create a key gives it an expiry in the same
-- run (cover_new, or a plain PEXPIREAT where the key is known to be new);
-- extensions are one PEXPIREAT ... GT (a write only when later; Redis 7.0).
-- Expiries are never shortened, so a key may outlive its last lease (by up
-- to the longest TTL granted), never the other way round; when nobody holds
-- or waits any more, tidy deletes I and M at once (an emptied zset is
-- deleted by Redis itself). GT treats a key without an expiry as never
-- expiring and leaves it so: only a foreign PERSIST makes one, and it still
-- goes when the lock next becomes empty.

-- cover(key, at): key, which has an expiry, lives at least until `at` (a
-- missing key is left alone).
local function cover(key, at) redis.call('PEXPIREAT', key, at, 'GT') end

-- The same for a key this run may have created (no expiry yet): one call
-- when it is new, two when it was not.
local function cover_new(key, at)
  if redis.call('PEXPIREAT', key, at, 'NX') == 0 then cover(key, at) end
end

-- I, which records waiters as well as holders, lives until `at`: and so
-- does L (when there is a queue), so that a waiter's record never outlives
-- the lease that lets a purge find it. Before, a waiter that died while a
-- holder kept renewing left its record in I for as long as the lock was
-- held: Q, X and L expired with the last waiter lease, and no purge could
-- see it any more. (L may outlive Q and X: a purge reads L.)
local function cover_records(at)
  cover(I, at)
  cover(L, at)
end

-- OOM: a server at its maxmemory (noeviction) refuses a command that may
-- grow memory (ZADD, HSET, HINCRBY, SET, LPUSH) when it would be a script's
-- first write, and allows it after any other write. A renewal, a holder's
-- acquire and a queued waiter's re-check rewrite leases that exist, which
-- grows nothing: they extend expiries first (PEXPIREAT, which Redis does
-- not refuse), so that a full server keeps the locks held and the waiters
-- queued. A new lock or a new waiter begins with SET of F or HSET or
-- HINCRBY of M, and is refused (OOM, 76) with nothing written.

-- What the script knows of M: whether it exists (nil: not asked yet), its
-- limit (nil: not read, false: absent) and purge_at (nil: not read), and
-- whether purge_at must be written back (save_purge_at).
local meta_exists, stored_limit, purge_at
local purge_at_dirty = false
-- True once this run created M (its expiry is set with cover_new).
local meta_new = false

-- The limit and purge_at (two HGETs: HMGET is not in the minimum ACL that
-- README.md documents, and a new command there would break an upgrade); a
-- purge_at that is missing or not a number reads as 0 (the next purge looks
-- at every lease).
local function read_meta()
  local limit = redis.call('HGET', M, 'limit')
  local at = redis.call('HGET', M, 'purge_at')
  stored_limit = limit
  if purge_at == nil then purge_at = tonumber(at or '') or 0 end
  if meta_exists == nil then meta_exists = (limit or at) and true or false end
end

-- A lease in H, S or L now ends at `at`: purge_at stays a lower bound.
local function lease_ends(at)
  if purge_at == nil then read_meta() end
  if at < purge_at then
    purge_at = at
    purge_at_dirty = true
  end
end

-- Writes purge_at back when it changed, and only into an existing M (an
-- HSET would create M without an expiry).
local function save_purge_at()
  if purge_at_dirty and meta_exists and purge_at < 2 ^ 53 then
    redis.call('HSET', M, 'purge_at', string.format('%.0f', purge_at))
  end
  purge_at_dirty = false
end

-- Every operation that may change a lease ends by writing purge_at back.
-- Each operation is dispatched as soon as the helpers it needs are
-- defined: defining a function costs about a fifth of a redis.call, and a
-- renewal needs few of them.
local function saved(reply)
  save_purge_at()
  return reply
end


local function fence_of(token)
  local record = redis.call('HGET', I, token)
  if not record then return 0 end
  return tonumber(string.match(record, '^(%d+)\n'))
end

-- A holder's acquire: its lease in `set` goes to `ttl` from now and the
-- reply is its fence (see acquire); nil when `token` holds nothing there
-- (a lease that ran out does not count: a purge removes it).
local function confirm(set, token, ttl)
  -- pcall: a foreign key at `set` is not a holder's; the type check below
  -- names it (redis.call would fail the script without the key's name).
  local score = redis.pcall('ZSCORE', set, token)
  if type(score) == 'table' then return nil end
  local until_ms = tonumber(score)
  if not until_ms or until_ms <= now then return nil end
  -- Read before any write: a foreign key at I fails the script here, and a
  -- forged fence in the record (not an integer from 1 to 2^53 - 1) is
  -- refused rather than handed to the holder's command.
  local fence = fence_of(token)
  if not (fence and fence >= 1 and fence < 2 ^ 53 and fence == math.floor(fence)) then
    return redis.error_reply('ERR the record of this holder in ' .. I .. ' holds no valid ' ..
      'fence, not part of an rlock lock: nothing was changed')
  end
  -- The holder exists, so do its set, I and M (each with an expiry). The
  -- expiries first (see OOM).
  cover(set, now + ttl)
  cover_records(now + ttl)
  cover(M, now + ttl)
  redis.call('ZADD', set, now + ttl, token)
  if now + ttl < until_ms then
    -- A holder's acquire with a shorter TTL than before (rare).
    lease_ends(now + ttl)
    save_purge_at()
  end
  return { 1, fence }
end

-- The most frequent call, answered before the rest of the script is even
-- built and before the type check below (the lock is not free: this token
-- holds it): a waiter confirming the grant handed to it (the acquire it
-- sent behind its BLPOP), or a retried acquire. A quorum's acquire
-- (MIN_UPTIME_MS given) goes the long way, through its uptime check.
if op == 'acquire' and not ARGV[9] then
  local refused = acl_refusal({ H, S, L, I, M }, LEASE_COMMANDS)
  if refused then return refused end
  local held = confirm(ARGV[3] == 'shared' and S or H, redis.sha1hex(ARGV[2]), tonumber(ARGV[5]))
  if held then return held end
end

if op == 'renew' then
  local refused = acl_refusal({ H, S, L, I, M }, LEASE_COMMANDS)
  if refused then return refused end
elseif op ~= 'status' then
  local wake = wake_key(string.rep('0', 40))
  local refused = acl_refusal({ H, S, Q, X, L, I, M, F, A, wake }, { 'EXISTS', 'TYPE',
    'PEXPIREAT', 'PTTL', 'ZADD', 'ZREM', 'ZSCORE', 'ZRANK', 'ZCARD', 'ZCOUNT', 'ZRANGE',
    'ZRANGEBYSCORE', 'ZREMRANGEBYSCORE', 'HGET', 'HSET', 'HDEL', 'HINCRBY', 'GET', 'SET', 'LPUSH',
    'INFO' })
  if refused then return refused end
  if not redis.acl_check_cmd('EXISTS', H, S, Q, X, L, I, M, F, A, wake) then
    return redis.error_reply('NOPERM this user may not read every key of this lock, which ' ..
      'rlock needs: nothing was changed (see Minimum ACL in rlock(1))')
  end
end

-- Refuse to touch keys of another type: a foreign key at our name is an
-- error, never something to overwrite. A free lock usually has nothing but
-- F (one EXISTS of the others, then F's TYPE: `fresh`); the nine TYPE calls
-- run only when something else is there. While M lives the other keys are
-- ours, unless something wrote over one since: then Redis' own WRONGTYPE
-- would stop the script halfway, keeping what it wrote before (a waiter
-- queued with nobody to take its grant, a release done but reported
-- failed). So every operation that may write looks at them all first; a
-- renewal and a holder's acquire (above) write only leases of their own,
-- after reads that fail first, and a status writes nothing.
local function foreign(key, kind)
  local actual = redis.call('TYPE', key).ok
  if actual ~= 'none' and actual ~= kind then
    return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. actual ..
      ', not part of an rlock lock')
  end
end
-- The first of the lock's keys (but `skip`) that has another type: its error.
local function foreign_key(skip)
  for _, pair in ipairs({ { H, 'zset' }, { S, 'zset' }, { Q, 'zset' }, { X, 'zset' },
    { L, 'zset' }, { I, 'hash' }, { M, 'hash' }, { F, 'string' }, { A, 'string' } }) do
    local err = pair[1] ~= skip and foreign(pair[1], pair[2])
    if err then return err end
  end
end
local meta_type = redis.call('TYPE', M).ok
meta_exists = meta_type == 'hash'
-- The layout of a lock's keys and values is this script's, layout 1. Every
-- rlock ever released keeps M's name and reads its `layout` field here: a
-- later rlock whose layout this one could misread writes M with `layout`
-- set to its number and no `limit` (so that status' plain reads, which
-- start from the limit, fall back to this script). An rlock of another
-- layout is then refused, named, while both are in use (M lives as long as
-- anyone holds or waits), instead of two of them each counting themselves
-- the holder. An M without the field is layout 1.
if meta_exists and op ~= 'renew' then
  local layout = redis.call('HGET', M, 'layout')
  if layout and layout ~= '1' then
    return redis.error_reply('ERR rlock: lock ' .. M .. ' is in use by an rlock of another ' ..
      'lock layout (' .. string.sub(layout, 1, 16) .. '; this rlock reads layout 1): ' ..
      'nothing was changed; every client of a lock must be an rlock of the same layout ' ..
      '(see COMPATIBILITY in rlock(1))')
  end
end
-- A hash at M without a limit is no M of ours (every run that makes M
-- writes its limit first): another application's hash at this name.
local function meta_without_limit()
  return redis.error_reply('WRONGTYPE key ' .. M .. ' holds a hash without a limit, not ' ..
    'part of an rlock lock: nothing was changed')
end
local fresh = false
if not meta_exists then
  fresh = meta_type == 'none' and redis.call('EXISTS', H, S, Q, X, L, I, A) == 0
  local err
  if fresh then err = foreign(F, 'string') else err = foreign_key(nil) end
  if err then return err end
elseif op ~= 'renew' and op ~= 'status' then
  local err = foreign_key(M)
  if err then return err end
  -- So is a limit that is not one: the grants would compare with it halfway.
  -- And a hash without one, which the lock would fill with its fields and
  -- delete when it ends.
  local limit = redis.call('HGET', M, 'limit')
  if not limit then return meta_without_limit() end
  if not (string.match(limit, '^%d+$') and #limit <= 9 and tonumber(limit) >= 1) then
    return redis.error_reply('ERR key ' .. M .. ' holds a limit that is not a positive ' ..
      'integer, not part of an rlock lock: nothing was changed')
  end
end

-- renew TOKEN TTL_MS [exact] -> the lease left in ms (TTL_MS, or more when
-- more was left), or 0 when the token does not hold the lock. TTL_MS 0
-- renews for the TTL the lock was acquired with. With `exact` the lease is
-- TTL_MS from now even when that is sooner (`run` after its command ended).
-- Also confirms a grant handed over to the token.
-- A renew does not purge: it answers from the holder's own lease (one that
-- ran out is not renewed), and the others' ended leases are the next
-- acquire's, release's or waiter's re-check's to purge.
local function renew()
  local token, ttl = redis.sha1hex(ARGV[2]), tonumber(ARGV[3])
  local held, until_ms
  for _, set in ipairs({ H, S }) do
    until_ms = tonumber(redis.call('ZSCORE', set, token))
    if until_ms then
      held = set
      break
    end
  end
  if not held or until_ms <= now then return 0 end
  if ttl <= 0 then
    ttl = tonumber(string.match(redis.call('HGET', I, token) or '', '^%d+\n%d+\n%a+\n(%d+)\n'))
      or 30000
  end
  -- A renew extends a lease, never shortens it: a supervising `rlock run`
  -- counts on the end it last set, so a nested `rlock renew --token
  -- "$RLOCK_TOKEN" --ttl 1s` must not let another holder in while its
  -- command still runs. The reply is then the lease left.
  -- (A lease beyond any TTL, forged to inf or 1e300, is not one to keep:
  -- it would not even fit the reply.)
  if now + ttl < until_ms and until_ms - now < 2 ^ 53 then
    if ARGV[4] ~= 'exact' then return until_ms - now end
    lease_ends(now + ttl)
  end
  -- The holder exists, so do its set, I and M (each with an expiry). The
  -- expiries first (see OOM).
  cover(held, now + ttl)
  cover_records(now + ttl)
  cover(M, now + ttl)
  redis.call('ZADD', held, now + ttl, token)
  return ttl
end

if op == 'renew' then return saved(renew()) end


-- The earliest lease in `key` (a zset of leases), math.huge when empty; a
-- score that does not read as a number counts as already ended.
local function earliest(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #first == 0 then return math.huge end
  return tonumber(first[2]) or 0
end

-- Forgets `token` for good (it left the lock or the queue): its record,
-- and the place a quorum waiter keeps (see place_back).
local function forget(token)
  redis.call('HDEL', I, token)
  redis.call('HDEL', M, 'p:' .. token)
end

-- Remove holders whose lease ran out and waiters whose lease ran out.
-- Returns true when something was removed (a waiter may now proceed).
-- purge_at (in M) is a lower bound of every lease in H, S and L, lowered
-- by every call that sets a shorter one (lease_ends): while it is in the
-- future nothing can have run out, and the purge costs nothing beyond the
-- HGET next to the one that reads the limit. Otherwise each set's earliest lease is
-- read (one ZRANGE), the ended ones removed, and purge_at set to the
-- earliest lease left.
local function purge()
  if purge_at == nil then read_meta() end
  if purge_at > now then return false end
  local removed, next_at = false, math.huge
  for _, key in ipairs({ H, S, L }) do
    local first = earliest(key)
    if first <= now then
      for _, token in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', now)) do
        if key == L then
          redis.call('ZREM', Q, token)
          redis.call('ZREM', X, token)
          redis.call('DEL', wake_key(token))
        end
        forget(token)
        removed = true
      end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
      first = earliest(key)
    end
    if first < next_at then next_at = first end
  end
  purge_at, purge_at_dirty = next_at, true
  return removed
end


-- A waiter's lease now ends at `at`; `joined` when it just entered the queue.
-- Q, X and L get the same expiry here, so that a waiter left in Q never
-- outlives its lease in L (it could never be purged). They are extended a
-- whole lease beyond `at`, so the re-checks of a long queue (one per waiter
-- per second) mostly find nothing to write, and no earlier than I (see
-- cover_records). Whether to is read from Q: L is extended elsewhere (by
-- cover_records, and first by a queued waiter's re-check, see OOM), and
-- reading it, the re-checks stopped extending Q and X, which expired under
-- a queue that a holder kept waiting: every waiter joined again, in no
-- particular order (probe D).
local function cover_queue(at, joined)
  local left = redis.call('PTTL', Q)
  if joined or left < 0 or now + left < at then
    local to = at + (at - now)
    if left > 0 and now + left > to then to = now + left end
    local leases = redis.call('PTTL', L)
    if leases > 0 and now + leases > to then to = now + leases end
    local records = redis.call('PTTL', I)
    if records > 0 and now + records > to then to = now + records end
    redis.call('PEXPIREAT', Q, to)
    redis.call('PEXPIREAT', X, to)
    redis.call('PEXPIREAT', L, to)
    -- I and M exist (someone holds or waits ahead), unless this run
    -- created M.
    local cover_meta = meta_new and cover_new or cover
    cover_meta(I, to)
    cover_meta(M, to)
  end
end

-- After a release, a forced release or a waiter leaving (the calls that end
-- a lease early): I and M go at once if nobody holds or waits any more, and
-- otherwise live exactly as long as the longest-lived of H, S and L (whose
-- expiries bound their members' leases): not until the lease of someone who
-- already left, and no shorter than a grant just handed over.
-- `granted_until`: a handover left H and S holding only its grants, whose
-- set expires then, so only L's expiry is read.
local function tidy(granted_until)
  local latest, keys = 0, { H, S, L }
  if granted_until then
    latest, keys = granted_until - now, { L }
  elseif redis.call('EXISTS', H, S, L) == 0 then
    redis.call('DEL', I, M)
    meta_exists, purge_at_dirty = false, false
    return
  end
  for _, key in ipairs(keys) do
    local left = redis.call('PTTL', key)
    -- A key without an expiry (a foreign PERSIST): I and M are only
    -- extended, to the grants if there are any.
    if left == -1 then
      if granted_until then
        cover_records(granted_until)
        cover(M, granted_until)
      end
      return
    end
    if left > latest then latest = left end
  end
  if latest <= 0 then return end
  redis.call('PEXPIREAT', I, now + latest)
  redis.call('PEXPIREAT', M, now + latest)
  cover(L, now + latest)
end

local cached_limit
local function limit_of()
  if not cached_limit then
    if stored_limit == nil then read_meta() end
    cached_limit = tonumber(stored_limit or '1')
  end
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

-- How long a grant handed to a waiter by someone else's call (a release, a
-- purge, a forced release, a waiter leaving) lasts until the new holder
-- confirms it, if its TTL is longer: the waiter lease (k_waiter_lease), and
-- no longer than what is left of the waiter's own lease in L. A waiter that
-- died while queued loses the grant as soon as it would have lost its place
-- in the queue (before, GRANT_MS after the grant: a waiter dead for 2 s held
-- the queue up for 5); a live one re-checks every second, so at least 2 s
-- are left, and it confirms at once (the acquire it sent behind its BLPOP
-- runs as soon as the BLPOP is served).
local GRANT_MS = 3000

-- Whether `counter` (F's value) is one rlock can count on: an integer
-- below 2^53 - 1 in decimal, so that counter + 1 is exact as a double.
local function counter_ok(counter)
  return string.match(counter, '^%d+$') and #counter <= 16 and tonumber(counter) < 2 ^ 53 - 1
end
local function broken_counter()
  return redis.error_reply('ERR rlock: the fence counter ' .. F ..
    ' does not hold an integer below 2^53 - 1; the lock is left untouched')
end

-- The next fence, max(f + 1, TIME in µs), written back to F; nil when the
-- counter is not an integer below 2^53 - 1 (acquire reports that error; a
-- handover simply grants nothing and lets the waiter ask itself).
local fence_counter
local function next_fence()
  if fence_counter == nil then
    local counter = redis.call('GET', F)
    if counter and not counter_ok(counter) then
      fence_counter = false
    else
      fence_counter = tonumber(counter or '0')
    end
  end
  if fence_counter == false then return nil end
  fence_counter = math.max(fence_counter + 1, now_us)
  local text = string.format('%.0f', fence_counter)
  redis.call('SET', F, text)
  return fence_counter, text
end

-- A record's fields after its fence and since_ms ("\nmode\nttl_ms\nblob"),
-- nil when it is no record.
local function record_tail(record)
  return string.match(record or '', '^%d+\n%d+(\n.*)$')
end

-- Hands the lock to queued waiter `token` in `mode`: it leaves the queue and
-- holds with a fence, for GRANT_MS, its TTL or the rest of its waiter lease,
-- whichever is shortest, and the grant (its
-- fence) is pushed onto its wake list, unless `quiet` (the caller itself,
-- which learns it from the reply). False when the fence counter is broken
-- or the wake list is a foreign key.
local function hand_over(token, mode, quiet)
  -- A foreign key at the waiter's wake list: no grant (nothing is written),
  -- and the waiter learns of that key when it waits on it.
  if not quiet then
    local kind = redis.call('TYPE', wake_key(token)).ok
    if kind ~= 'none' and kind ~= 'list' then return false end
  end
  local fence, fence_text = next_fence()
  if not fence then return false end
  local rest = record_tail(redis.call('HGET', I, token))
  local ttl = rest and tonumber(string.match(rest, '^\n%a+\n(%d+)\n'))
  if not ttl then ttl, rest = 30000, '\n' .. mode .. '\n30000\n' end
  local lease = math.min(ttl, GRANT_MS)
  if not quiet then
    -- Within the waiter's own lease (see GRANT_MS); a purge ran first, so
    -- it has not ended.
    local until_ms = tonumber(redis.call('ZSCORE', L, token) or '')
    if until_ms and until_ms - now < lease then lease = math.max(until_ms - now, 1) end
  end
  redis.call('ZREM', Q, token)
  if mode ~= 'shared' then redis.call('ZREM', X, token) end
  redis.call('ZREM', L, token)
  local set = mode == 'shared' and S or H
  redis.call('ZADD', set, now + lease, token)
  lease_ends(now + lease)
  redis.call('HSET', I, token, fence_text .. '\n' .. now .. rest)
  if not quiet then
    local key = wake_key(token)
    redis.call('LPUSH', key, fence_text)
    redis.call('PEXPIREAT', key, now + lease)
  end
  return set, lease
end

-- Grants the lock to each waiter who can now proceed, and to no one else;
-- `self` (a queued caller) is granted quietly. Returns true when it granted.
-- `then_tidy`: the caller ended a lease early, and I and M are set to what
-- is left (tidy) rather than only extended. `except`: a waiter just put
-- back in its place (place_back), which is granted nothing now, and nobody
-- behind it is either (it takes the lock at its next try).
local function wake_ready(self, then_tidy, except)
  local head = redis.call('ZRANGE', Q, 0, 0)
  if #head == 0 then return false end
  local ready, mode
  -- Most often nobody holds any more (one EXISTS instead of two ZCARDs).
  local nobody = redis.call('EXISTS', H, S) == 0
  if redis.call('ZSCORE', X, head[1]) == false then
    if not nobody and redis.call('ZCARD', H) > 0 then return false end
    -- A shared waiter at the head: it and every shared waiter up to the first
    -- exclusive one can go together.
    local first_x = redis.call('ZRANGE', X, 0, 0, 'WITHSCORES')
    local bound = #first_x > 0 and ('(' .. first_x[2]) or '+inf'
    ready = redis.call('ZRANGEBYSCORE', Q, '-inf', bound)
    mode = 'shared'
  else
    local free = limit_of()
    if not nobody then
      if redis.call('ZCARD', S) > 0 then return false end
      free = free - redis.call('ZCARD', H)
    end
    if free <= 0 then return false end
    ready = free == 1 and { head[1] } or redis.call('ZRANGE', Q, 0, free - 1)
    mode = 'exclusive'
    -- A semaphore's places go to the exclusive waiters in order, up to the
    -- first shared one (it waits for the holders to leave, and nobody
    -- behind it overtakes it).
    for k = 2, #ready do
      if redis.call('ZSCORE', X, ready[k]) == false then
        for j = #ready, k, -1 do table.remove(ready, j) end
        break
      end
    end
  end
  -- The set, I and M live at least as long as the longest grant (not its
  -- TTL: a grant that is never confirmed must not keep them); the
  -- confirmation extends them. The set may be new (its last holder just
  -- left), I and M are not (they hold the waiters' records). The set's
  -- expiry is then exactly the longest grant, which tidy relies on.
  local longest, set = 0, nil
  for _, token in ipairs(ready) do
    if token == except then break end
    local granted, lease = hand_over(token, mode, token == self)
    if not granted then break end
    set = granted
    if lease > longest then longest = lease end
  end
  if not set then return false end
  cover_new(set, now + longest)
  if then_tidy then
    tidy(nobody and now + longest or nil)
  else
    cover_records(now + longest)
    cover(M, now + longest)
  end
  return true
end

-- A quorum waiter that gives back a grant it took from its place in the
-- queue (KEEP_PLACE 2: a majority of members did not grant it, as they
-- still showed the last holder) goes back to that place, with its arrival
-- number, and a waiter lease: the place is
-- recorded in M (p:HASH, "seq:since_ms") from when it first queued here
-- until it leaves the queue or the lock for good. Without it, the waiter
-- behind took the lock here, and the members' queues came to disagree on
-- the order whenever a release reached the members at different times (a
-- waiter woken by the first member found the others still held). `held`
-- is the set it held in. True when it went back.
local function place_back(token, held)
  local place = redis.call('HGET', M, 'p:' .. token)
  local seq, since = string.match(place or '', '^(%d+):(%d+)$')
  local rest = record_tail(redis.call('HGET', I, token))
  if not (seq and rest) then return false end
  redis.call('ZADD', Q, seq, token)
  if held ~= S then redis.call('ZADD', X, seq, token) end
  redis.call('ZADD', L, now + GRANT_MS, token)
  lease_ends(now + GRANT_MS)
  redis.call('HSET', I, token, '0\n' .. since .. rest)
  -- The grant's word, if the waiter has not read it, is no grant any more.
  redis.call('DEL', wake_key(token))
  cover_queue(now + GRANT_MS, true)
  return true
end

-- release TOKEN [KEEP_PLACE] -> 1 released (or left the queue), 0 not held
-- by this token. A retried release is harmless: it answers 0 and changes
-- nothing. The place it frees goes to the next waiter(s) at once
-- (wake_ready). With KEEP_PLACE ('1') a waiter's place in the queue stays:
-- only a grant is given back (a quorum waiter whose try a member answered
-- too late to count: it may have queued the waiter there, or granted);
-- with '2', a grant taken from a place in the queue also goes back there
-- (place_back). Not with '1': members whose queues disagree would each
-- keep granting their own first waiter, none of them a majority, for ever.
local function release()
  local token = redis.sha1hex(ARGV[2])
  local keep = ARGV[3] == '1' or ARGV[3] == '2'
  purge()
  -- ZREM answers whether it held: no lookup first.
  local held = (redis.call('ZREM', H, token) == 1 and H) or
    (redis.call('ZREM', S, token) == 1 and S) or nil
  local found, back = held ~= nil, false
  if held then
    back = ARGV[3] == '2' and place_back(token, held)
    if not back then forget(token) end
  elseif not keep and redis.call('ZSCORE', Q, token) then
    redis.call('ZREM', Q, token)
    redis.call('ZREM', X, token)
    redis.call('ZREM', L, token)
    forget(token)
    found = true
  end
  -- The place goes to the next waiter(s); if there is nobody, I and M go.
  if not wake_ready(nil, true, back and token or nil) then tidy() end
  return found and 1 or 0
end

if op == 'release' then return saved(release()) end

local function holder_set(token)
  if redis.call('ZSCORE', H, token) then return H end
  if redis.call('ZSCORE', S, token) then return S end
  return nil
end


-- The lease left until `at`, as a reply integer: a score may be anything a
-- foreign write put there (+inf would not convert to an integer), so it is
-- bounded by 2^53 ms, beyond any real lease.
local function lease_left(at)
  return math.max(0, math.min(at - now, 2 ^ 53))
end

local function first_holder()
  for _, key in ipairs({ H, S }) do
    local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #top > 0 then
      return { redis.call('HGET', I, top[1]) or '', lease_left(tonumber(top[2])) }
    end
  end
  return { '', 0 }
end

-- acquire TOKEN MODE LIMIT TTL_MS BLOB ENQUEUE LEASE_MS [MIN_UPTIME_MS]
-- Returns {1, fence} when held (also when this token already held it: a
-- retried acquire is idempotent, and it is how a waiter confirms a grant
-- that was handed to it, extending it to TTL_MS), {0, position,
-- holder_record, holder_ttl, now} when busy or queued (position 0 = not
-- queued; now, the server's time, dates the record's since_ms), {-1,
-- stored_limit} when the lock is used with another --limit, {-2, uptime_ms}
-- when this server has been up for less than MIN_UPTIME_MS (a quorum member
-- that may have restarted without the locks it held: it grants nothing and
-- queues nobody until it has been up that long, and writes nothing).
local function acquire()
  local token, mode, limit, ttl, blob = redis.sha1hex(ARGV[2]), ARGV[3], tonumber(ARGV[4]),
    tonumber(ARGV[5]), ARGV[6]
  local enqueue, lease = ARGV[7] == '1', tonumber(ARGV[8])
  local min_uptime = tonumber(ARGV[9] or '0') or 0
  if min_uptime > 0 then
    local uptime = uptime_ms()
    if uptime < min_uptime then return { -2, uptime } end
  end
  local set = mode == 'shared' and S or H
  -- A holder's acquire (answered at the top already when no uptime check
  -- is asked for).
  local held = ARGV[9] and confirm(set, token, ttl)
  if held then return held end
  -- A counter that is not an integer below 2^53 - 1 (so that counter + 1 is
  -- exact as a double) cannot give a next fence; a failed script keeps the
  -- writes made before the failure (M without an expiry, a waiter taken out
  -- of the queue): refuse before writing anything.
  local counter = redis.call('GET', F)
  if counter and not counter_ok(counter) then return broken_counter() end
  fence_counter = tonumber(counter or '0')
  if fresh and (mode == 'shared' or limit >= 1) then
    -- Nothing of this lock but F exists (the type check found so): it is
    -- granted at once, and every key it writes is new.
    local fence, fence_text = next_fence()
    redis.call('ZADD', set, now + ttl, token)
    redis.call('HSET', I, token, fence_text .. '\n' .. now .. '\n' .. mode .. '\n' .. ttl .. '\n' .. blob)
    redis.call('HSET', M, 'limit', limit, 'purge_at', now + ttl)
    for _, key in ipairs({ set, I, M }) do redis.call('PEXPIREAT', key, now + ttl) end
    return { 1, fence }
  end
  read_meta()
  local stored = stored_limit
  local purged = purge()
  if stored and tonumber(stored) ~= limit then
    -- M may outlive the last lease (see cover): a limit nobody uses any
    -- more is forgotten, a live one is an error.
    if redis.call('EXISTS', H, S, L) > 0 then
      if purged then wake_ready() end
      return { -1, tonumber(stored) }
    end
    redis.call('DEL', I, M)
    stored, meta_exists, purge_at, purge_at_dirty = nil, false, math.huge, false
  end
  if not stored then
    -- M is new although the lock is not (rare: the audit key, or leftovers
    -- of a foreign write): it gets an expiry now, past every lease there is
    -- and this caller's, since not every path below extends it.
    redis.call('HSET', M, 'limit', limit)
    meta_exists, meta_new = true, true
    local latest = math.max(ttl, lease or 0)
    for _, key in ipairs({ H, S, L }) do latest = math.max(latest, redis.call('PTTL', key)) end
    redis.call('PEXPIREAT', M, now + latest)
  end
  cached_limit = limit
  -- A purge may free a place: whoever is next gets it now, this caller too
  -- (quietly: it learns from this reply).
  if purged and wake_ready(token) then
    held = confirm(set, token, ttl)
    if held then return held end
  end

  local rank = redis.call('ZRANK', Q, token)
  local queued = rank ~= false
  local seq
  if queued then
    -- Only a shared waiter needs its arrival number (see grantable).
    if mode == 'shared' then seq = redis.call('ZSCORE', Q, token) end
  else
    rank = redis.call('ZCARD', Q)
  end
  if grantable(mode, rank, seq) then
    if queued then
      redis.call('ZREM', Q, token)
      if mode ~= 'shared' then redis.call('ZREM', X, token) end
      redis.call('ZREM', L, token)
    end
    local fence, fence_text = next_fence()
    redis.call('ZADD', set, now + ttl, token)
    lease_ends(now + ttl)
    redis.call('HSET', I, token, fence_text .. '\n' .. now .. '\n' .. mode .. '\n' .. ttl .. '\n' .. blob)
    -- The set, I and M may be new (a first co-holder, M just written).
    for _, key in ipairs({ set, I, M }) do cover_new(key, now + ttl) end
    cover(L, now + ttl)
    return { 1, fence }
  end

  local holder = first_holder()
  if not enqueue then
    if queued then
      -- A waiter that gives up leaves the queue; those behind may now go.
      redis.call('ZREM', Q, token)
      redis.call('ZREM', X, token)
      redis.call('ZREM', L, token)
      forget(token)
      if not wake_ready(nil, true) then tidy() end
    end
    return { 0, 0, holder[1], holder[2], now }
  end
  if not queued then
    seq = redis.call('HINCRBY', M, 'seq', 1)
    redis.call('ZADD', Q, seq, token)
    if mode ~= 'shared' then redis.call('ZADD', X, seq, token) end
    redis.call('HSET', I, token, '0\n' .. now .. '\n' .. mode .. '\n' .. ttl .. '\n' .. blob)
    -- A quorum's waiter (MIN_UPTIME given) may give back a grant it takes
    -- from this place: it then goes back here (place_back).
    if ARGV[9] then redis.call('HSET', M, 'p:' .. token, seq .. ':' .. now) end
  end
  -- A queued waiter's first write extends an expiry (see OOM).
  if queued then cover(L, now + lease) end
  redis.call('ZADD', L, now + lease, token)
  lease_ends(now + lease)
  cover_queue(now + lease, not queued)
  return { 0, rank + 1, holder[1], holder[2], now }
end

if op == 'acquire' then
  local reply = acquire()
  -- A quorum's acquire (MIN_UPTIME given) also says how long this server
  -- has been up and which server it is (INFO's run_id, last). A grant from
  -- a member younger than a holder that other members show may be one it
  -- forgot in a restart; one server reached through two members' URLs (two
  -- nodes of one Cluster, a Sentinel group and its master's own URL) would
  -- vote twice. The client refuses both.
  if ARGV[9] and type(reply) == 'table' and reply.err == nil then
    table.insert(reply, uptime_ms())
    table.insert(reply, string.match(info_server(), 'run_id:(%x+)') or '')
  end
  return saved(reply)
end

-- "len:bytes" netstrings (records may hold any byte), and back; nil when
-- the text is not netstrings.
local function netstrings(fields)
  local parts = {}
  for k, v in ipairs(fields) do parts[k] = #v .. ':' .. v end
  return table.concat(parts)
end
local function parse_netstrings(text)
  local fields, pos = {}, 1
  while pos <= #text do
    local colon = string.find(text, ':', pos, true)
    if not colon then return nil end
    local digits = string.sub(text, pos, colon - 1)
    if not string.match(digits, '^%d+$') then return nil end
    local size = tonumber(digits)
    if colon + size > #text then return nil end
    table.insert(fields, string.sub(text, colon + 1, colon + size))
    pos = colon + size + 1
  end
  return fields
end

-- How many forced releases the audit key keeps, and for how long: enough to
-- see a fight between operators (or a forged entry next to real ones)
-- without letting the key grow.
local AUDIT_KEEP, AUDIT_MS = 20, 24 * 3600 * 1000

-- force ID AUDIT_BLOB ACL_USER -> {now, id1, record1, id2, record2, ...} of
-- the evicted holders. ID '' evicts every holder; otherwise the holder whose
-- short id (first 8 hex digits of its hash) is ID. The release is added to
-- the audit key, newest first, with AUDIT_BLOB (who the client says it is)
-- and ACL_USER (the Redis user the client says it is connected as: a script
-- may not call ACL WHOAMI itself). Both are self-reported: whoever may run
-- this script may also write the audit key directly.
-- A semaphore's holders are recorded as exclusive (the client tells them
-- apart by the lock's limit): an evicted one's record says semaphore, so
-- that the reply and the audit entry keep what it held once the limit is
-- gone with the lock.
local function as_held(key, record)
  if key ~= H or (limit_of() or 1) <= 1 then return record end
  local head, mode, tail = string.match(record, '^([^\n]*\n[^\n]*\n)([^\n]*)(\n.*)$')
  if mode ~= 'exclusive' then return record end
  return head .. 'semaphore' .. tail
end

local function force()
  local id, audit, acl_user = ARGV[2], ARGV[3], ARGV[4] or ''
  purge()
  local evicted = {}
  for _, key in ipairs({ H, S }) do
    for _, hash in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      local short = string.sub(hash, 1, 8)
      if id == '' or id == short then
        table.insert(evicted, short)
        table.insert(evicted, as_held(key, redis.call('HGET', I, hash) or ''))
        -- Word to the holder: an rlock run waits on its wake list between
        -- renewals, and stops its command as soon as the renewal this
        -- wakes finds the lock gone. Kept until the lease would have ended
        -- (nobody else reads it); a foreign key there gets nothing.
        local until_ms = tonumber(redis.call('ZSCORE', key, hash) or '') or now
        -- A forged lease (beyond a week, inf, nan) is no expiry to write.
        if not (until_ms > now and until_ms < now + 7 * 24 * 3600 * 1000) then until_ms = now end
        local wake = wake_key(hash)
        local kind = redis.call('TYPE', wake).ok
        redis.call('ZREM', key, hash)
        forget(hash)
        if kind == 'none' or kind == 'list' then
          redis.call('LPUSH', wake, '0')
          redis.call('PEXPIREAT', wake, math.floor(until_ms) + 1000)
        end
      end
    end
  end
  if #evicted > 0 then
    local entry = { tostring(now), audit, acl_user }
    for _, v in ipairs(evicted) do table.insert(entry, v) end
    local kept = { netstrings(entry) }
    -- Earlier entries that are still young; anything unreadable (an older
    -- rlock's format, a foreign write) is dropped rather than trusted.
    for _, old in ipairs(parse_netstrings(redis.call('GET', A) or '') or {}) do
      if #kept >= AUDIT_KEEP then break end
      local fields = parse_netstrings(old)
      local at = fields and tonumber(string.match(fields[1] or '', '^%d+$') or '')
      if at and now - at < AUDIT_MS then table.insert(kept, old) end
    end
    redis.call('SET', A, netstrings(kept), 'PX', AUDIT_MS)
  end
  if not wake_ready(nil, true) then tidy() end
  table.insert(evicted, 1, now)
  return evicted
end

-- status [UPTIME] -> {now, limit, last_fence, holders, waiters, audit}, and
-- with UPTIME ('1') this server's uptime_ms(), role() and run_id (INFO,
-- last, as in an acquire's reply) after them
-- (a quorum member's word that nobody holds the lock counts only once it
-- has been up for the TTL; two members that are one server would vote
-- twice); read-only, so it also works on a replica. holders: {id, ttl_ms,
-- record, ...}; waiters in queue order: {id, lease_ms, record, ...}; audit:
-- the audit key as stored. A limit that is not a number (a foreign write)
-- reads as 1, so that the reply keeps its shape; a fence counter that
-- acquire would refuse is an error, as there.
local function status()
  local holders = {}
  for _, key in ipairs({ H, S }) do
    local live = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf', 'WITHSCORES')
    for k = 1, #live, 2 do
      table.insert(holders, string.sub(live[k], 1, 8))
      table.insert(holders, lease_left(tonumber(live[k + 1])))
      table.insert(holders, redis.call('HGET', I, live[k]) or '')
    end
  end
  local waiters = {}
  for _, hash in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
    local lease = tonumber(redis.call('ZSCORE', L, hash) or '0')
    if lease > now then
      table.insert(waiters, string.sub(hash, 1, 8))
      table.insert(waiters, lease_left(lease))
      table.insert(waiters, redis.call('HGET', I, hash) or '')
    end
  end
  -- A counter that acquire would refuse is no fence to show (it read as 0,
  -- or rounded, and the lock as free): the lock is reported broken.
  local counter = redis.call('GET', F)
  if counter and not counter_ok(counter) then return broken_counter() end
  -- Another application's hash at M: a lock every write refuses is not
  -- shown as free (or left out of a listing) either.
  if meta_exists then
    if stored_limit == nil then read_meta() end
    if not stored_limit then return meta_without_limit() end
  end
  local reply = { now, limit_of() or 1, tonumber(counter or '0'), holders, waiters,
    redis.call('GET', A) or '' }
  if ARGV[2] == '1' then
    table.insert(reply, uptime_ms())
    table.insert(reply, role())
    table.insert(reply, string.match(info_server(), 'run_id:(%x+)') or '')
  end
  return reply
end

-- raise FENCE [TOKEN] -> the fence counter afterwards: max(counter, FENCE).
-- The second step of a quorum grant: every member of the majority that
-- granted is raised to the fence handed out, so that any later majority,
-- which shares a member with this one, hands out a higher fence. TOKEN's
-- record, if it holds the lock here, is given that fence too, so that
-- status shows the fence its holder really got.
local function raise()
  local fence = tonumber(ARGV[2])
  local token = ARGV[3] and redis.sha1hex(ARGV[3])
  local counter = redis.call('GET', F)
  if not fence or fence ~= math.floor(fence) or fence < 0 or fence >= 2 ^ 53 - 1 then
    return redis.error_reply('ERR rlock: raise needs an integer fence below 2^53 - 1')
  end
  if counter and not (string.match(counter, '^%d+$') and #counter <= 16) then
    return redis.error_reply('ERR rlock: the fence counter ' .. F ..
      ' does not hold an integer below 2^53 - 1; the lock is left untouched')
  end
  if token and holder_set(token) then
    local record = redis.call('HGET', I, token)
    local held = record and tonumber(string.match(record, '^(%d+)\n'))
    if held and held < fence then
      redis.call('HSET', I, token, string.format('%.0f', fence) .. string.sub(record, #string.match(record, '^%d+') + 1))
    end
  end
  if counter and tonumber(counter) >= fence then return tonumber(counter) end
  redis.call('SET', F, string.format('%.0f', fence))
  return fence
end

if op == 'raise' then return raise() end
if op == 'force' then return saved(force()) end
if op == 'status' then return status() end
return redis.error_reply('ERR rlock: unknown operation ' .. tostring(op))
