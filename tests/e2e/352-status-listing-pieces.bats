#!/usr/bin/env bats
# A large `rlock status` listing is written in 64 KB pieces as it is rendered
# (src/output/render.cpp), and its locks are sorted after they were read in
# SCAN's order: the text listing of a few thousand locks (several pieces)
# must still be one header and every lock once, in name order, exactly the
# locks of the JSON listing.

load helpers

@test "status listing: a text listing of several pieces has every lock once, sorted" {
  # 3000 locks: ~370 KB of text, six pieces.
  "$PYTHON" - "$REDIS_PORT" <<'PY'
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
p = r.pipeline(transaction=False)
for i in range(3000):
    # Not created in name order, and names of several lengths.
    k = (i * 7919) % 3000
    base = f"rlock:{{piece-{k}}}:"
    p.zadd(base + "h", {f"{k:040x}": 4102444800000})
    p.hset(base + "i", f"{k:040x}", f"{k + 1}\n1700000000000\nexclusive\n3600000\n5:owner2:vm1:11:x")
    p.hset(base + "m", mapping={"limit": "1", "seq": "1"})
    p.set(base + "f", str(1795350950866118 + k))
p.execute()
PY
  rl 0 status
  local text="$output"
  run "$PYTHON" -c '
import sys
lines = sys.stdin.read().split("\n")
assert lines[-1] == "", "no final newline"
lines = lines[:-1]
assert lines[0].startswith("NAME "), lines[0]
names = [l.split()[0] for l in lines[1:]]
assert sum(1 for l in lines if l.startswith("NAME ")) == 1, "header repeated"
assert names == sorted(names), "not sorted"
assert len(set(names)) == len(names), "a lock listed twice"
print(len(names), names[0], names[-1])' <<<"$text"
  assert_success
  assert_output "3000 piece-0 piece-999"
  rl 0 --json status
  local from_json
  from_json="$("$PYTHON" -c 'import json,sys; print(" ".join(l["name"] for l in json.load(sys.stdin)["locks"]))' <<<"$output")"
  assert_equal "$from_json" "$(tail -n +2 <<<"$text" | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')"
}
