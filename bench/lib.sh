# bench/lib.sh - shell helpers shared by the bench scripts (run.sh, egressd_ab.sh,
# txn_cost.sh, idle_hold.sh, placement.sh), sourced: . "$(dirname "$0")/lib.sh"
# The caller keeps its started processes in PIDS and its scratch folder in TMP, and
# installs `trap cleanup EXIT` and `trap 'exit 130' INT TERM` once TMP exists.

# cleanup: TERM every pid in PIDS, wait for each at most STOP_TICKS tenths of a second
# (default 50), then KILL and reap it; remove TMP.
cleanup() {
	trap - EXIT INT TERM
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt "${STOP_TICKS:-50}" ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}

# wait_file FILE: true once FILE is non-empty, false after 5 s.
wait_file() { i=0; while [ ! -s "$1" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; [ -s "$1" ]; }

# cpu_ticks PID: user + system CPU of the process in clock ticks (0 once it is gone).
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# machine_ticks: "BUSY IDLE" clock ticks of the whole machine, summed over its CPUs
# (/proc/stat: user nice system irq softirq steal; idle iowait).
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }

# rss_kib PID: resident memory of the process in KiB (0 once it is gone).
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# cpus_allowed PID: the CPUs PID may run on, as a taskset list (0-1, 0,2, ...); empty when
# the process is gone.
cpus_allowed() { awk '/^Cpus_allowed_list:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# pin_tree PID CPUS: a process, all its threads and all its descendants (squid's helpers,
# egressd's route helper) to CPUS (a taskset list: 0, 0-1, ...); nothing without a PID.
# For the one-CPU latency of make bench and egressd_ab.sh, where no wake-up of a
# transaction crosses CPUs (docs/performance.md, "The fifteenth round"). Non-zero when one
# of them could not be pinned (gone already, or CPUS not usable). Recursion-safe: its own
# state is in its positional parameters.
pin_tree() {
	[ -n "$1" ] || return 0
	# (taskset -a answers 0 for a PID that is gone: util-linux 2.38)
	# once more after a failure: taskset -a stops at a thread that ends while it runs
	# (tinyproxy's, one per connection)
	[ -d "/proc/$1" ] && { taskset -a -p -c "$2" "$1" >/dev/null 2>&1 ||
	    taskset -a -p -c "$2" "$1" >/dev/null 2>&1; } || set -- "$1" "$2" failed
	for _pt_c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
		pin_tree "$_pt_c" "$2" || set -- "$1" "$2" failed
	done
	[ "${3:-}" != failed ]
}

# dropid PID: PID leaves PIDS (it was stopped, or another part stops it).
dropid() {
	_dp_n=""
	for _dp_p in $PIDS; do [ "$_dp_p" = "$1" ] || _dp_n="$_dp_n $_dp_p"; done
	PIDS=$_dp_n
}

# stop_pid PID: TERM, at most 5 s, then KILL; reaped, and out of PIDS.
stop_pid() {
	kill -TERM "$1" 2>/dev/null
	_sp_i=0
	while kill -0 "$1" 2>/dev/null && [ $_sp_i -lt 50 ]; do sleep 0.1; _sp_i=$((_sp_i + 1)); done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	dropid "$1"
}

# kv KEY LINE: the value of KEY=value in a line of egload's output (empty without it).
kv() { echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }

# wait_listen ADDR PORT PID: true once ADDR:PORT is listening, false when PID exits first
# or after 10 s.
wait_listen() {
	_wl_i=0
	while [ $_wl_i -lt 100 ]; do
		ss -Hltn "( sport = :$2 )" 2>/dev/null | grep -q "$1:$2" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
		_wl_i=$((_wl_i + 1))
	done
	return 1
}

# egressd_ini FILE LOG SYNC: the [egressd] section every bench egressd starts from, into
# FILE: no control socket, the decision log LOG with log_sync SYNC, room for 20,000
# connections, the loopback origin allowed (127.0.0.0/8 is special-purpose), splice on.
# The caller appends its own [egressd] options first, then its listeners and grants.
egressd_ini() {
	printf '%s\n' '[egressd]' 'control_socket = none' "decision_log = $2" "log_sync = $3" \
	    'max_connections = 20000' 'allow_special_address = 127.0.0.0/8' 'splice = on' > "$1"
}

# egressd_grant FILE NAME PORT ALLOW [LINE...]: a listener NAME on 127.0.0.1:PORT and its
# grant NAME allowing ALLOW (4,096 connections, the most a grant allows), with any further
# grant lines (pinning = required, ...), appended to FILE.
egressd_grant() {
	_eg_f=$1 _eg_n=$2 _eg_p=$3 _eg_a=$4
	shift 4
	printf '\n[listener %s]\nlisten = 127.0.0.1:%s\ngrant = %s\n\n[grant %s]\nallow = %s\nconnections = 4096\n' \
	    "$_eg_n" "$_eg_p" "$_eg_n" "$_eg_n" "$_eg_a" >> "$_eg_f"
	[ $# -eq 0 ] || printf '%s\n' "$@" >> "$_eg_f"
}

# free_port: sets PORT to a free loopback port (no TCP or UDP socket on it): the next one
# after FREE_PORT_NEXT, which the caller sets once to a per-run offset (so that parallel runs
# rarely collide) and this advances; from 60000 it wraps to 21000. Call it as a command,
# never inside $(...): the advance would be lost. Dies (die) after 500 ports in use.
free_port() {
	_fp_i=0
	while [ $_fp_i -lt 500 ]; do
		FREE_PORT_NEXT=$((FREE_PORT_NEXT + 1))
		[ "$FREE_PORT_NEXT" -gt 60000 ] && FREE_PORT_NEXT=21000
		if ! ss -Htuan "( sport = :$FREE_PORT_NEXT )" 2>/dev/null | grep -q .; then
			# shellcheck disable=SC2034 # the caller's
			PORT=$FREE_PORT_NEXT
			return 0
		fi
		_fp_i=$((_fp_i + 1))
	done
	die "no free port"
}

# rotate_list R WORD...: the words in a rotating order for round R (from word R mod N on,
# then the ones before it), so that no target always runs first. Call it as $(...).
rotate_list() {
	_rl_k=$(($1 % ($# - 1)))
	shift
	_rl_out=""
	_rl_i=0
	for _rl_w in "$@"; do [ $_rl_i -ge $_rl_k ] && _rl_out="$_rl_out $_rl_w"; _rl_i=$((_rl_i + 1)); done
	_rl_i=0
	for _rl_w in "$@"; do [ $_rl_i -lt $_rl_k ] && _rl_out="$_rl_out $_rl_w"; _rl_i=$((_rl_i + 1)); done
	# shellcheck disable=SC2086
	echo $_rl_out   # unquoted: one line of words
}

# paired_ratios TARGET [REF]: on stdin lines "TARGET ROUND VALUE", TARGET's value / REF's
# value (REF: relay) for every round that has both, one per line, ascending.
paired_ratios() {
	awk -v t="$1" -v ref="${2:-relay}" '$3 != "" { v[$1 SUBSEP $2] = $3; r[$2] = 1 }
	    END { for (i in r) if ((t SUBSEP i) in v && (ref SUBSEP i) in v && v[ref SUBSEP i] > 0)
	        print v[t SUBSEP i] / v[ref SUBSEP i] }' | sort -g
}

# paired_median TARGET [REF]: the median of paired_ratios, as a plain number with four
# decimals ("" when no round has both). The host's noise moves a round's runs together, so
# pairing within a round removes much of it.
paired_median() {
	paired_ratios "$@" | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.4f", v[(NR + 1) / 2];
	    else if (NR) printf "%.4f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# paired_range TARGET [REF]: "LOW HIGH", the smallest and the largest of paired_ratios
# (four decimals; "" when no round has both): how far one round's ratio strays here, so a
# reader sees whether a goal's bound lies inside the spread of the rounds.
paired_range() {
	paired_ratios "$@" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%.4f %.4f", lo, hi }'
}

# paired_ci TARGET [REF]: "LOW HIGH PCT", a distribution-free confidence interval for the
# median of paired_ratios from its order statistics: [x(k), x(n+1-k)] with the largest k
# whose coverage 1 - 2 P(Bin(n, 1/2) <= k-1) is at least 90% (PCT: that coverage, whole
# percent, rounded down). n = 5 gives the lowest and the highest (93%), n = 15 the 4th and
# the 12th (96%), n = 20 the 6th and the 15th (95%). Fewer than 5 rounds: the lowest and
# the highest with the coverage they have (n = 3: 75%). "" when no round has both.
paired_ci() {
	paired_ratios "$@" | awk '{ v[NR] = $1 }
	    END {
		n = NR
		if (n == 0) exit
		# cdf[j] = P(B <= j), B ~ Bin(n, 1/2)
		p = 1; c = 0; for (i = 0; i < n; i++) p /= 2
		for (j = 0; j <= n; j++) { c += p; cdf[j] = c; p = p * (n - j) / (j + 1) }
		k = 1
		while (k + 1 <= n + 1 - (k + 1) && 1 - 2 * cdf[k] >= 0.90) k++
		cov = 1 - 2 * cdf[k - 1]
		printf "%.4f %.4f %d", v[k], v[n + 1 - k], int(cov * 100 + 1e-9)
	    }'
}

# ci_side "LOW HIGH PCT" OP BOUND: where an interval (paired_ci) lies against a goal's
# bound: met (all of it on the goal's side), missed (none of it), open (the bound lies
# inside it; also without an interval, or one whose coverage is below 90%: fewer than 5
# units). OP: le, ge (inclusive: the ratio goals), lt, gt (strict: below and above a peer).
ci_side() {
	awk -v v="$1" -v o="$2" -v b="$3" 'BEGIN {
		if (split(v, a, " ") != 3 || a[3] + 0 < 90) { print "open"; exit }
		lo = a[1] + 0; hi = a[2] + 0; b += 0
		if (o == "le") print (hi <= b ? "met" : (lo > b ? "missed" : "open"))
		else if (o == "ge") print (lo >= b ? "met" : (hi < b ? "missed" : "open"))
		else if (o == "lt") print (hi < b ? "met" : (lo >= b ? "missed" : "open"))
		else if (o == "gt") print (lo > b ? "met" : (hi <= b ? "missed" : "open"))
		else print "open" }'
}

# ci_verdict VERDICT SIDE...: VERDICT (yes or no, from the medians) with its firmness
# from the intervals' ci_side: "yes (firm)" when every side is met, "no (firm)" when at
# least one is missed, else "... (not firm)"; "—" for any other VERDICT (no figure).
ci_verdict() {
	_cv_v=$1
	shift
	case $_cv_v in
	yes)
		_cv_f=firm
		for _cv_s in "$@"; do [ "$_cv_s" = met ] || _cv_f="not firm"; done
		;;
	no)
		_cv_f="not firm"
		for _cv_s in "$@"; do [ "$_cv_s" = missed ] && _cv_f=firm; done
		;;
	*)
		echo "—"
		return 0
		;;
	esac
	echo "$_cv_v ($_cv_f)"
}
