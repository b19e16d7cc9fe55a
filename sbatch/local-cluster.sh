#!/usr/bin/env bash
# local-cluster.sh -- run a real, single-node SLURM cluster on this machine.
#
# Meant for trying rlinfluence's SLURM paths (`launcher=slurm`, sbatch/run_array.sbatch)
# on a laptop or CI runner, and for the tests marked `slurm`. Debian/Ubuntu only: it uses
# the distribution's packages (slurm-wlm, munge; slurmdbd + MariaDB for accounting) and
# starts every daemon by hand, so it needs no systemd and touches no system service.
#
#   sbatch/local-cluster.sh up        install missing packages (root), write configs,
#                                     start the daemons, wait for an idle node
#   sbatch/local-cluster.sh down      cancel our jobs, stop the daemons we started
#   sbatch/local-cluster.sh down --purge     ... and delete the state directory
#   sbatch/local-cluster.sh status    our daemons and `sinfo`
#   eval "$(sbatch/local-cluster.sh env)"    point this shell's SLURM commands at it
#
# Needs root: packages, and daemons that switch to the munge and mysql users (jobs run
# as the submitting user). `up` and `down` are idempotent: `up` only starts what is not
# running, `down` only signals processes whose PIDs this script recorded (and checks
# their names first).
# /etc/slurm is left alone: the cluster is reached through SLURM_CONF only.
#
# Settings (environment variables, all optional; use the same values for up and down):
#   LOCAL_SLURM_DIR            state, logs, configs, pid files   [/tmp/rlinfluence-slurm]
#   LOCAL_SLURM_ACCOUNTING     1: slurmdbd + MariaDB, so sacct knows finished and
#                              killed jobs (submitit needs this to notice a job that
#                              died without a result); 0: no accounting    [1]
#   LOCAL_SLURM_CPUS           CPUs to declare for the node (may exceed the real count,
#                              to run wider arrays at once)                [detected]
#   LOCAL_SLURM_MEM_PER_CPU    DefMemPerCPU in MB                          [1000]
#   LOCAL_SLURM_MAX_ARRAY_SIZE MaxArraySize (largest array index + 1)      [1001]
#   LOCAL_SLURM_PARTITION      name of the (default) partition             [debug]
#   LOCAL_SLURM_PORT           slurmctld port; slurmd, slurmdbd use +1, +2 [6817]
#   LOCAL_SLURM_DB_PORT        MariaDB port (loopback only)                [3307]
#   LOCAL_SLURM_INSTALL        0: never apt-get install, fail instead      [1]
set -euo pipefail
export PATH="/usr/sbin:/sbin:$PATH"

STATE=${LOCAL_SLURM_DIR:-/tmp/rlinfluence-slurm}
ACCOUNTING=${LOCAL_SLURM_ACCOUNTING:-1}
MEM_PER_CPU=${LOCAL_SLURM_MEM_PER_CPU:-1000}
MAX_ARRAY_SIZE=${LOCAL_SLURM_MAX_ARRAY_SIZE:-1001}
PARTITION=${LOCAL_SLURM_PARTITION:-debug}
CTLD_PORT=${LOCAL_SLURM_PORT:-6817}
SLURMD_PORT=$((CTLD_PORT + 1))
DBD_PORT=$((CTLD_PORT + 2))
DB_PORT=${LOCAL_SLURM_DB_PORT:-3307}
INSTALL=${LOCAL_SLURM_INSTALL:-1}

SLURM_CONF_FILE=$STATE/etc/slurm.conf
MUNGE_SOCKET=$STATE/munge/socket
DB_SOCKET=$STATE/mariadb/mysqld.sock
DB_USER=slurm
DB_PASSWORD=rlinfluence-local     # loopback-only database holding job records
NODE=$(hostname -s)
export SLURM_CONF=$SLURM_CONF_FILE

say() { printf '[local-cluster] %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

# ------------------------------------------------------------------ process bookkeeping
# Each daemon runs in the foreground of its own session; its PID goes to
# $STATE/pid/<name>. A daemon is "up" when that PID is alive and still runs the
# expected program. An exited daemon is re-parented to PID 1, which may reap it
# late: a zombie counts as gone.

exists() {  # pid
  [[ -r /proc/$1/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

alive() {   # pid expected-comm
  exists "$1" && [[ $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]]
}

recorded_pid() { cat "$STATE/pid/$1" 2>/dev/null || true; }

is_up() {   # name (= program name)
  local pid; pid=$(recorded_pid "$1")
  [[ -n $pid ]] && alive "$pid" "$1"
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

launch() {  # name port ready-check -- command...
  local name=$1 port=$2 ready=$3 pid i
  shift 4
  if is_up "$name"; then
    say "$name already running (pid $(recorded_pid "$name"))"
    return 0
  fi
  if [[ $port != - ]] && port_taken "$port"; then
    fail "port $port is taken by another program; pick other ports (LOCAL_SLURM_PORT / LOCAL_SLURM_DB_PORT)"
  fi
  # setsid without job control execs in place, so $! is the daemon itself.
  # 9>&- : the daemon must not inherit the lock held on fd 9 (see with_lock).
  setsid "$@" >"$STATE/log/$name.stdout" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$STATE/pid/$name"
  for ((i = 0; i < 240; i++)); do          # up to 60 s
    # (right after the fork the PID may still be running setsid or setpriv)
    if ! exists "$pid"; then
      tail -n 20 "$STATE/log/$name.stdout" "$STATE/log/$name.log" 2>/dev/null >&2 || true
      fail "$name exited during start-up (logs under $STATE/log)"
    fi
    if alive "$pid" "$name" && $ready >/dev/null 2>&1; then
      say "$name started (pid $pid)"
      return 0
    fi
    sleep 0.25
  done
  fail "$name did not become ready within 60 s (logs under $STATE/log)"
}

halt() {    # name...  SIGTERM together, wait up to 15 s, SIGKILL what is left
  local name pid waiting=() i
  for name in "$@"; do
    if is_up "$name"; then
      pid=$(recorded_pid "$name")
      kill -TERM "$pid" 2>/dev/null || true
      waiting+=("$name:$pid")
    fi
    rm -f "$STATE/pid/$name"
  done
  for ((i = 0; i < 60 && ${#waiting[@]}; i++)); do
    local still=()
    for entry in "${waiting[@]}"; do
      if alive "${entry#*:}" "${entry%%:*}"; then still+=("$entry"); else say "${entry%%:*} stopped"; fi
    done
    waiting=("${still[@]+"${still[@]}"}")
    if ((${#waiting[@]})); then sleep 0.25; fi
  done
  for entry in "${waiting[@]+"${waiting[@]}"}"; do
    say "${entry%%:*} ignored SIGTERM; sending SIGKILL"
    kill -KILL "${entry#*:}" 2>/dev/null || true
  done
}

# ------------------------------------------------------------------ packages
install_packages() {
  local missing=()
  command -v munged >/dev/null || missing+=(munge)
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  if [[ $ACCOUNTING == 1 ]]; then
    command -v slurmdbd >/dev/null || missing+=(slurmdbd)
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
  fi
  ((${#missing[@]})) || return 0
  [[ $INSTALL == 1 ]] || fail "missing packages: ${missing[*]} (LOCAL_SLURM_INSTALL=0)"
  [[ $(id -u) == 0 ]] || fail "missing packages: ${missing[*]}; run once as root to install them"
  say "installing ${missing[*]}"
  # Package scripts would start munge/slurm/mariadb as system services; a
  # policy-rc.d that says "no" keeps them from doing so (ours is removed afterwards).
  local own_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  local rc=0
  { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  } >"$STATE/log/apt.log" 2>&1 || rc=$?
  if ((own_policy)); then rm -f /usr/sbin/policy-rc.d; fi
  ((rc == 0)) || { tail -n 25 "$STATE/log/apt.log" >&2; fail "apt-get failed (log: $STATE/log/apt.log)"; }
}

# ------------------------------------------------------------------ configuration
node_definition() {
  # `slurmd -C` prints this machine as a slurm.conf node line. Declare a little
  # less memory than it sees, so the node is not drained for "low RealMemory".
  local probe mem
  probe=$(slurmd -C | head -n 1)
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$probe")
  mem=$((mem > 4096 ? mem - 1024 : mem * 3 / 4))
  if [[ -n ${LOCAL_SLURM_CPUS:-} ]]; then
    echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$LOCAL_SLURM_CPUS RealMemory=$mem State=UNKNOWN"
  else
    sed -e "s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1/" \
        -e "s/RealMemory=[0-9]*/RealMemory=$mem/" <<<"$probe" | sed 's/$/ State=UNKNOWN/'
  fi
}

write_slurm_conf() {
  local accounting="AccountingStorageType=accounting_storage/none"
  if [[ $ACCOUNTING == 1 ]]; then
    # AccountingStoragePass names the munge socket used for the slurmdbd link;
    # AuthInfo is NOT used there, and without it slurmctld looks for /run/munge.
    accounting="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MUNGE_SOCKET"
  fi
  local overrides=""
  if [[ -n ${LOCAL_SLURM_CPUS:-} ]]; then overrides="SlurmdParameters=config_overrides"; fi
  cat >"$SLURM_CONF_FILE.tmp" <<EOF
# Written by rlinfluence sbatch/local-cluster.sh; regenerated by every fresh 'up'.
ClusterName=rlinfluence
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# No cgroups here: track processes through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$accounting
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that asks for no memory gets the whole node and
# array tasks run one at a time.
DefMemPerCPU=$MEM_PER_CPU
MaxArraySize=$MAX_ARRAY_SIZE
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# There is no mail transport; slurmctld refuses to start with an invalid MailProg.
MailProg=/bin/true
KillWait=10
$overrides
$(node_definition)
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$SLURM_CONF_FILE.tmp" "$SLURM_CONF_FILE"
}

write_slurmdbd_conf() {
  # slurmdbd has no option for its config file: it reads slurmdbd.conf from the
  # directory of $SLURM_CONF. It must be private (mode 600) or slurmdbd refuses it.
  (umask 077
   cat >"$STATE/etc/slurmdbd.conf" <<EOF
# Written by rlinfluence sbatch/local-cluster.sh
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=$DB_USER
StoragePass=$DB_PASSWORD
StorageLoc=slurm_acct_db
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
EOF
  )
}

# ------------------------------------------------------------------ readiness checks
munge_ready() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }
sql() { mariadb --no-defaults --socket="$DB_SOCKET" -u root "$@"; }
db_ready() { sql -e 'SELECT 1'; }
dbd_ready() { port_taken "$DBD_PORT"; }
ctld_ready() { scontrol ping | grep -q 'is UP'; }
node_ready() {
  local state
  state=$(sinfo --noheader --nodes="$NODE" --format=%t) || return 1
  case $state in
    idle* | mix* | alloc*) return 0 ;;
    # A node that went down with the previous session comes back on request.
    down* | drain*) scontrol update NodeName="$NODE" State=RESUME ;;
  esac
  return 1
}

# ------------------------------------------------------------------ daemons
start_munge() {
  local dir=$STATE/munge
  install -d -o munge -g munge -m 755 "$dir"   # clients of every user reach the socket
  if [[ ! -s $dir/munge.key ]]; then
    setpriv --reuid=munge --regid=munge --init-groups mungekey --create --keyfile="$dir/munge.key"
  fi
  # setpriv execs munged (runuser would stay behind as its parent).
  launch munged - munge_ready -- \
    setpriv --reuid=munge --regid=munge --init-groups \
    munged --foreground --socket="$MUNGE_SOCKET" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$STATE/log/munged.log" --seed-file="$dir/seed"
}

start_mariadb() {
  local data=$STATE/mariadb/data
  install -d -o mysql -g mysql "$STATE/mariadb" "$data"
  if [[ ! -d $data/mysql ]]; then
    mariadb-install-db --no-defaults --user=mysql --datadir="$data" --skip-test-db \
      --auth-root-authentication-method=socket >"$STATE/log/mariadb-install.log" 2>&1 ||
      { tail -n 20 "$STATE/log/mariadb-install.log" >&2; fail "mariadb-install-db failed"; }
  fi
  # slurmdbd warns about a small buffer pool or lock timeout; these silence it.
  launch mariadbd "$DB_PORT" db_ready -- \
    mariadbd --no-defaults --user=mysql --datadir="$data" --socket="$DB_SOCKET" \
    --pid-file="$STATE/mariadb/mysqld.pid" --log-error="$STATE/log/mariadbd.log" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
    --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900
  sql -e "CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
          GRANT ALL ON slurm_acct_db.* TO '$DB_USER'@'127.0.0.1';"
}

start_slurm_daemons() {
  if [[ $ACCOUNTING == 1 ]]; then
    launch slurmdbd "$DBD_PORT" dbd_ready -- slurmdbd -D
  fi
  launch slurmctld "$CTLD_PORT" ctld_ready -- slurmctld -D -f "$SLURM_CONF_FILE"
  launch slurmd "$SLURMD_PORT" node_ready -- slurmd -D -f "$SLURM_CONF_FILE" -N "$NODE"
  # A controller restarted next to a running slurmd sees the node as UNKNOWN until
  # slurmd registers again: wait for that too.
  local i
  for ((i = 0; i < 240; i++)); do
    if node_ready >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  fail "node $NODE did not become ready within 60 s (logs under $STATE/log)"
}

check_ports() {  # before starting anything: the ports of daemons we still have to start
  local name port
  for name in mariadbd:$DB_PORT slurmdbd:$DBD_PORT slurmctld:$CTLD_PORT slurmd:$SLURMD_PORT; do
    port=${name#*:}; name=${name%%:*}
    if [[ $ACCOUNTING != 1 && ($name == mariadbd || $name == slurmdbd) ]]; then continue; fi
    if ! is_up "$name" && port_taken "$port"; then
      fail "port $port ($name) is taken by another program; pick other ports (LOCAL_SLURM_PORT / LOCAL_SLURM_DB_PORT)"
    fi
  done
}

# ------------------------------------------------------------------ commands
with_lock() {   # serialise concurrent up/down on the same state directory
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  flock 9
}

cmd_up() {
  local started=$SECONDS
  [[ $(id -u) == 0 ]] || fail "run as root (packages; munged and mariadbd switch users)"
  mkdir -p "$STATE"/{etc,log,pid,run,ctld,spool}
  chmod 755 "$STATE"
  install_packages
  check_ports
  # Keep the running controller's view consistent: rewrite configs only when
  # the controller is down (a restart after a crash or a fresh state dir).
  if ! is_up slurmctld; then
    write_slurm_conf
    if [[ $ACCOUNTING == 1 ]]; then write_slurmdbd_conf; fi
  fi
  start_munge
  if [[ $ACCOUNTING == 1 ]]; then start_mariadb; fi
  start_slurm_daemons
  say "cluster ready after $((SECONDS - started)) s; now run: eval \"\$($0 env)\""
  sinfo >&2
}

cmd_down() {
  if is_up slurmctld; then
    # Cancel the jobs first, so slurmd's job steps are not left behind.
    local jobs=()
    mapfile -t jobs < <(squeue --noheader --format=%A 2>/dev/null | sort -u)
    if ((${#jobs[@]})); then
      say "cancelling jobs: ${jobs[*]}"
      scancel "${jobs[@]}" 2>/dev/null || true
      for ((i = 0; i < 60; i++)); do
        [[ -z $(squeue --noheader --format=%A 2>/dev/null) ]] && break
        sleep 0.25
      done
    fi
  fi
  halt slurmd slurmctld                 # the cluster first,
  halt slurmdbd mariadbd munged         # then what it relies on
  if [[ ${1:-} == --purge ]]; then
    rm -rf "$STATE"
    say "removed $STATE"
  fi
}

cmd_status() {
  local name rc=0
  for name in munged mariadbd slurmdbd slurmctld slurmd; do
    if is_up "$name"; then
      echo "$name: running (pid $(recorded_pid "$name"))"
    elif [[ $name == mariadbd || $name == slurmdbd ]] && [[ $ACCOUNTING != 1 ]]; then
      echo "$name: not used (LOCAL_SLURM_ACCOUNTING=0)"
    else
      echo "$name: stopped"; rc=1
    fi
  done
  echo "SLURM_CONF=$SLURM_CONF_FILE"
  sinfo 2>/dev/null || true
  return $rc
}

case ${1:-} in
  up) with_lock; cmd_up ;;
  down) [[ -d $STATE ]] || exit 0; with_lock; shift; cmd_down "$@" ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF_FILE" ;;
  *) echo "usage: $0 up | down [--purge] | status | env" >&2; exit 2 ;;
esac
