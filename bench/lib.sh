# Helpers the bench scripts share (sourced, not run).

field() {  # report.json, dotted path
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d.get(k, "?") if isinstance(d, dict) else "?"
print(d)' "$1" "$2"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }  # seconds from now() $1 to $2
