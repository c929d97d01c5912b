# Sourced by the bench scripts (ab.sh, cpu-split.sh).
# ticks PID: "utime stime" in clock ticks (getconf CLK_TCK a second) of PID,
# its children and all their threads, from /proc.
ticks () {
  local u=0 s=0 p t line f
  for p in "$1" $(pgrep -P "$1" || true); do
    for t in /proc/"$p"/task/*/stat; do
      line="$(cat "$t" 2>/dev/null)" || continue
      read -r -a f <<< "${line##*) }" # the fields after "(comm)", which may hold spaces: f[11] = utime, f[12] = stime
      u=$((u + f[11])) s=$((s + f[12]))
    done
  done
  echo "$u $s"
}
