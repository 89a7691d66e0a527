"""The Redis hold's Lua scripts: each runs atomically inside Redis.

Keys (all under one hash tag, ``{prefix}``; see :class:`Keys`):

* ``due``: sorted set, member ``<source topic>/<schedule id>``, score the due time (ms).
* ``s:<member>``: the held version (:mod:`.codec`), expiring ``grace`` after its due time
  (a time to live from the batch time).
* ``t:<run>:<batch>:<partition>``: a task record, hash: what one Spark task of one
  micro-batch decided (``now``, ``ev`` its events as Arrow IPC, ``c1..cn`` the versions
  it claimed), ``state`` (``open``; ``done`` once another pipeline finished it), the
  owner (``run``, ``owner``, ``batch``, ``part``). A replay of the task reads it back.
* ``tasks``: sorted set of open task records by lease end; ``r:<run>``: a run's task
  records by batch id (released once the run is past them).
* ``runs``: hash run -> last heartbeat (ms); ``owners``: hash source topic -> run.
"""

from __future__ import annotations

from dataclasses import dataclass

from delayline.holds.redis.codec import TOKEN_BYTES


@dataclass(frozen=True, slots=True)
class Keys:
    """The key names of one prefix."""

    prefix: str

    @property
    def tag(self) -> str:
        return "{" + self.prefix + "}"

    @property
    def due(self) -> str:
        return f"{self.tag}:due"

    @property
    def held(self) -> str:
        """Prefix of the held versions' keys (``held + member``)."""
        return f"{self.tag}:s:"

    @property
    def tasks(self) -> str:
        return f"{self.tag}:tasks"

    @property
    def runs(self) -> str:
        return f"{self.tag}:runs"

    @property
    def owners(self) -> str:
        return f"{self.tag}:owners"

    def task(self, run: str, batch_id: int, partition: int) -> str:
        return f"{self.tag}:t:{run}:{batch_id}:{partition}"

    def run_index(self, run: str) -> str:
        return f"{self.tag}:r:{run}"


UNCHANGED = b"="
"""A write that only checks the version (an encoded value starts with its version byte,
never with this)."""

# KEYS: task, due, tasks, run index.
# ARGV: now, claim until (now + lead), claim limit, lease end, events, run, owner, batch,
#       partition, held-key prefix, number of writes, input fingerprint, then per write:
#       member, expected
#       token ('' = none), new value ('' = delete, '=' = unchanged), due score,
#       time to live (ms).
# Returns {'exists'} (a replay: read the record), {'conflict', member} (a version
# changed since it was read: fold again), or {'ok', lost, v1, v2, ...}: the claimed
# versions, and how many due members had lost their value (expired past the grace).
TASK = f"""
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'state') == 'open' then
    redis.call('ZADD', KEYS[3], ARGV[4], KEYS[1])
  end
  return {{'exists'}}
end
local hp = ARGV[10]
local n = tonumber(ARGV[11])
for i = 0, n - 1 do
  local b = 12 + i * 5
  local cur = redis.call('GET', hp .. ARGV[b + 1])
  local token = ''
  if cur then token = string.sub(cur, 1, {TOKEN_BYTES}) end
  if token ~= ARGV[b + 2] then return {{'conflict', ARGV[b + 1]}} end
end
for i = 0, n - 1 do
  local b = 12 + i * 5
  local m = ARGV[b + 1]
  if ARGV[b + 3] == '=' then
    -- checked above, left as it is
  elseif ARGV[b + 3] == '' then
    redis.call('DEL', hp .. m)
    redis.call('ZREM', KEYS[2], m)
  else
    redis.call('SET', hp .. m, ARGV[b + 3], 'PX', ARGV[b + 5])
    redis.call('ZADD', KEYS[2], ARGV[b + 4], m)
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, ARGV[3])
local out = {{'ok', 0}}
local kept = 0
redis.call('HSET', KEYS[1], 'now', ARGV[1], 'ev', ARGV[5], 'state', 'open', 'run', ARGV[6],
  'owner', ARGV[7], 'batch', ARGV[8], 'part', ARGV[9], 'in', ARGV[12])
for _, m in ipairs(due) do
  local v = redis.call('GET', hp .. m)
  redis.call('ZREM', KEYS[2], m)
  if v then
    redis.call('DEL', hp .. m)
    kept = kept + 1
    redis.call('HSET', KEYS[1], 'c' .. kept, v)
    out[#out + 1] = v
  else
    out[2] = out[2] + 1
  end
end
redis.call('HSET', KEYS[1], 'n', kept)
redis.call('ZADD', KEYS[3], ARGV[4], KEYS[1])
redis.call('ZADD', KEYS[4], ARGV[8], KEYS[1])
return out
"""

# KEYS: run index, tasks. ARGV: release records of batches below this id.
RELEASE = """
local ks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
for _, k in ipairs(ks) do
  redis.call('DEL', k)
  redis.call('ZREM', KEYS[2], k)
  redis.call('ZREM', KEYS[1], k)
end
return #ks
"""

# KEYS: task, tasks. ARGV: now, new lease end.
# Takes an open task record whose lease ended: returns it (HGETALL), renewed, or nil.
SEIZE = """
if redis.call('HGET', KEYS[1], 'state') ~= 'open' then return false end
local lease = redis.call('ZSCORE', KEYS[2], KEYS[1])
if not lease or tonumber(lease) > tonumber(ARGV[1]) then return false end
redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: task, tasks. Marks a seized record finished: its owner's replay writes nothing.
FINISH = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], KEYS[1])
  return 0  -- released meanwhile by its owner, who was past it
end
local keep = redis.call('HMGET', KEYS[1], 'run', 'owner', 'batch', 'part', 'now', 'in')
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'run', keep[1], 'owner', keep[2], 'batch', keep[3],
  'part', keep[4], 'now', keep[5], 'in', keep[6], 'ev', '', 'n', 0)
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
"""

# KEYS: owners, runs. ARGV: run, now, lease, then the source topics.
# Registers ``run`` as the reader of each topic; returns {topic, owner, last seen} of
# the first topic another live run reads, or {} when all are ours.
OWN = """
for i = 4, #ARGV do
  local owner = redis.call('HGET', KEYS[1], ARGV[i])
  if owner and owner ~= ARGV[1] then
    local seen = redis.call('HGET', KEYS[2], owner)
    if seen and tonumber(seen) > tonumber(ARGV[2]) - tonumber(ARGV[3]) then
      return {ARGV[i], owner, seen}
    end
  end
end
for i = 4, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], ARGV[1]) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {}
"""
