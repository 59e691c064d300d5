#!/bin/sh
# A real LAVA lab on this machine, for the tests and to try the lab path:
# Debian's lava-server (PostgreSQL, gunicorn on 127.0.0.1, lava-scheduler)
# and N lava-workers (kgate-local-worker-1 ... -N), each with devices of
# its own: one of LAVA's stock 'qemu' type and one of kgate's own
# 'kgate-qemu' type (templates/lab/), plus kgate's artifact server. No
# systemd here: each daemon is started by hand and stopped by its PID.
#
#   tools/lab-local.sh up [N] start (or find running) and set up, with N
#                             workers (default 1); prints the lavacli
#                             identity, kept in build/lab/config
#                             (XDG_CONFIG_HOME), and the artifact base URL
#   tools/lab-local.sh down   stop what 'up' started
#   tools/lab-local.sh env    the environment lines for lavacli/kgate.py
#
# Ports: LAVA_PORT (default 8010), SERVE_PORT (default 8011). Each worker
# runs its jobs' QEMU on this machine: N workers mean N jobs at once.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
lab=${KGATE_BUILD:-$top/build}/lab
LAVA_PORT=${LAVA_PORT:-8010}
SERVE_PORT=${SERVE_PORT:-8011}
PY=/usr/bin/python3
IDENTITY=kgate-local
WORKER_PREFIX=kgate-local-worker-
DEVCONF=/etc/lava-server/dispatcher-config

say() { echo "[lab] $*"; }
die() { echo "[lab] error: $*" >&2; exit 1; }

running() { [ -f "$lab/$1.pid" ] && kill -0 "$(cat "$lab/$1.pid")" 2>/dev/null; }

start() {
	name=$1
	shift
	if running "$name"; then
		return 0
	fi
	"$@" > "$lab/logs/$name.out" 2>&1 &
	echo $! > "$lab/$name.pid"
}

wait_http() {
	i=0
	until curl -sf -o /dev/null "$1"; do
		i=$((i + 1))
		[ $i -lt 120 ] || die "$2 did not answer at $1 (see $lab/logs/ and /var/log/lava-server/kgate/)"
		sleep 0.5
	done
}

manage() { lava-server manage "$@"; }

# Worker $1 (a number): registered, its devices, started.
add_worker() {
	w=$WORKER_PREFIX$1
	manage workers list --all 2>/dev/null | grep -qw "$w" || manage workers add "$w" > /dev/null
	token=$(manage workers details "$w" | awk '$1 == "token" { print $3 }')
	for dt in qemu kgate-qemu; do
		dev=kgate-local-$1-$dt
		manage devices list --all 2>/dev/null | grep -qw "$dev" ||
			manage devices add --device-type "$dt" --worker "$w" "$dev" > /dev/null
		if [ "$dt" = qemu ]; then
			printf "{%% extends 'qemu.jinja2' %%}\n{%% set no_kvm = True %%}\n"
		else
			printf "{%% extends 'kgate-qemu.jinja2' %%}\n"
		fi > "$DEVCONF/devices/$dev.jinja2"
	done
	mkdir -p "$lab/worker-$1"
	start "worker-$1" lava-worker --level INFO --url "http://127.0.0.1:$LAVA_PORT/" --token "$token" \
		--name "$w" --worker-dir "$lab/worker-$1" --log-file "$lab/logs/worker-$1.log"
}

# No local variables in sh: wait_online counts in n, the callers in i.
wait_online() {
	n=0
	until manage workers details "$1" 2>/dev/null | grep -q "state *: Online"; do
		n=$((n + 1))
		[ $n -lt 120 ] || die "worker $1 did not come online (see $lab/logs/)"
		sleep 0.5
	done
}

up() {
	workers=${1:-1}
	case "$workers" in
	'' | *[!0-9]* | 0) die "up: the number of workers must be 1 or more, not '$workers'" ;;
	esac
	command -v lava-server > /dev/null || die "lava-server is not installed: make deps"
	command -v lavacli > /dev/null || die "lavacli is not installed: make deps"
	mkdir -p "$lab/logs" "$lab/config"
	# gunicorn and the scheduler run as lavaserver, which may not be able
	# to reach a checkout under a private folder (/root, mktemp -d):
	# their logs go where it can.
	slogs=/var/log/lava-server/kgate
	mkdir -p "$slogs"
	chown lavaserver "$slogs"

	# PostgreSQL: the Debian cluster, started if it is down.
	if ! pg_lsclusters -h | awk '$4 == "online" { found = 1 } END { exit !found }'; then
		ver=$(pg_lsclusters -h | awk 'NR == 1 { print $1 }')
		clu=$(pg_lsclusters -h | awk 'NR == 1 { print $2 }')
		[ -n "$ver" ] || die "no PostgreSQL cluster (install postgresql: make deps)"
		pg_ctlcluster "$ver" "$clu" start
		echo "$ver $clu" > "$lab/postgresql.started"
		say "PostgreSQL $ver/$clu started"
	fi
	# lava-server's database: set up by its postinst only if PostgreSQL
	# was running then.
	if ! manage users list > /dev/null 2>&1; then
		say "setting up lava-server's database"
		$PY /usr/share/lava-server/postinst.py > "$lab/logs/postinst.out" 2>&1 ||
			die "lava-server postinst failed (see $lab/logs/postinst.out)"
	fi

	start gunicorn /usr/bin/gunicorn3 lava_server.wsgi --log-level info \
		--log-file "$slogs/gunicorn.log" -u lavaserver -g lavaserver \
		--worker-class eventlet --workers 2 --bind "127.0.0.1:$LAVA_PORT"
	wait_http "http://127.0.0.1:$LAVA_PORT/api/v0.2/system/version/" "lava-server"
	start scheduler lava-server manage lava-scheduler --level INFO \
		--log-file "$slogs/scheduler.log"

	# A user and a token for lavacli; the token lives only in lavacli's
	# own configuration under build/lab/config.
	manage users list 2>/dev/null | grep -qw kgate ||
		manage users add --staff --superuser kgate > /dev/null
	if ! XDG_CONFIG_HOME="$lab/config" lavacli -i "$IDENTITY" system version > /dev/null 2>&1; then
		secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
		manage tokens add --user kgate --description "kgate local lab" --secret "$secret" > /dev/null
		XDG_CONFIG_HOME="$lab/config" lavacli identities add \
			--uri "http://127.0.0.1:$LAVA_PORT/RPC2" --username kgate --token "$secret" "$IDENTITY"
	fi

	# The workers and their devices: worker i has kgate-local-<i>-qemu and
	# kgate-local-<i>-kgate-qemu. Workers of an earlier 'up' with more of
	# them stay offline: LAVA's scheduler gives jobs only to online ones.
	# (lava-server manage workers update --health fails in 2023.01.)
	install -m 644 templates/lab/kgate-qemu.jinja2 "$DEVCONF/device-types/kgate-qemu.jinja2"
	for dt in qemu kgate-qemu; do
		manage device-types list 2>/dev/null | grep -qw "$dt" || manage device-types add "$dt" > /dev/null
	done
	i=1
	while [ $i -le "$workers" ]; do
		add_worker $i
		i=$((i + 1))
	done
	start serve $PY tools/kgate.py serve --no-build --port "$SERVE_PORT"
	wait_http "http://127.0.0.1:$SERVE_PORT/" "kgate serve"
	i=1
	while [ $i -le "$workers" ]; do
		wait_online "$WORKER_PREFIX$i"
		i=$((i + 1))
	done
	say "LAVA $(curl -s "http://127.0.0.1:$LAVA_PORT/api/v0.2/system/version/") on http://127.0.0.1:$LAVA_PORT/, $workers worker(s) online"
	env_lines
}

env_lines() {
	echo "XDG_CONFIG_HOME=$lab/config"
	echo "KGATE_LAB_IDENTITY=$IDENTITY"
	echo "KGATE_LAB_BASE_URL=http://127.0.0.1:$SERVE_PORT/"
}

down() {
	workers=$(cd "$lab" 2>/dev/null && ls worker-*.pid 2>/dev/null | sed 's/\.pid$//')
	for name in serve $workers worker scheduler gunicorn; do
		if running "$name"; then
			pid=$(cat "$lab/$name.pid")
			kill "$pid" 2>/dev/null || true
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do
				i=$((i + 1))
				sleep 0.25
			done
			kill -9 "$pid" 2>/dev/null || true
			say "stopped $name ($pid)"
		fi
		rm -f "$lab/$name.pid"
	done
	if [ -f "$lab/postgresql.started" ]; then
		# shellcheck disable=SC2046
		pg_ctlcluster $(cat "$lab/postgresql.started") stop && say "PostgreSQL stopped"
		rm -f "$lab/postgresql.started"
	fi
}

case "${1:-}" in
up) up "${2:-1}" ;;
down) down ;;
env) env_lines ;;
*) echo "usage: $0 up [N]|down|env" >&2; exit 2 ;;
esac
