#!/usr/bin/env bash
# A single-node Slurm on this host, from Debian's packages, for CI and for trying the Slurm
# executor against a real scheduler (docs/executors.md):
#
#   scripts/slurm_cluster.sh start [--accounting]   # slurmctld + slurmd (+ slurmdbd, MariaDB)
#   scripts/slurm_cluster.sh status
#   scripts/slurm_cluster.sh stop                   # every daemon it started, and its state
#
# Needs root and the packages (the caller installs them; `make slurm-check` does):
#   apt-get install -y slurm-wlm munge            # and for --accounting: slurmdbd mariadb-server
# There is no systemd: the daemons are started directly. The node is this host
# (`hostname -s`) with the CPUs and memory `slurmd -C` finds; one partition, `debug`.
#
# `start` is idempotent: a cluster already up in the same setup is left as it is; one in the
# other setup is stopped first. A daemon that was already running before `start` (a munged or
# a MariaDB of the machine) is used and never stopped; `stop` ends only what `start` started,
# cancels every job first, and removes the configuration, spool folders and database it made.
# It refuses to overwrite an /etc/slurm/slurm.conf it did not write (a real cluster's).
set -euo pipefail

STATE=${SNNBENCH_SLURM_STATE:-/run/snnbench-slurm}
CONF_DIR=/etc/slurm
MARK="# written by snnbench scripts/slurm_cluster.sh"
CLUSTER=snnbench-ci
PARTITION=debug
DB=slurm_acct_db
DB_USER=slurm
LOGS=/var/log/slurm

say() { printf 'slurm_cluster: %s\n' "$*"; }
die() { printf 'slurm_cluster: error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# wait_for SECONDS WHAT COMMAND...: retry COMMAND every 0.2 s until it succeeds
wait_for() {
    local limit=$1 what=$2
    shift 2
    local deadline
    deadline=$(( $(date +%s) + limit ))
    until "$@" >/dev/null 2>&1; do
        if (( $(date +%s) >= deadline )); then
            die "$what did not come up within ${limit} s (logs: $LOGS, $STATE)"
        fi
        sleep 0.2
    done
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
pid_of() { [[ -f "$1" ]] && cat "$1" 2>/dev/null || true; }

# remember a daemon this script started: stop ends exactly these
started() { echo "$1 $2" >> "$STATE/started"; }

need_root() { [[ $(id -u) == 0 ]] || die "run as root (it starts system daemons)"; }

need_packages() {
    local missing=()
    for cmd in "$@"; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
    ((${#missing[@]} == 0)) || die "missing ${missing[*]}: apt-get install -y slurm-wlm munge$(
        [[ " $* " == *" slurmdbd "* ]] && echo " slurmdbd mariadb-server")"
}

# -- munge --------------------------------------------------------------------------------
start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        return  # the machine's own munged: used, never stopped
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating a munge key (/etc/munge/munge.key)"
        install -d -o munge -g munge -m 0700 /etc/munge
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
        echo "/etc/munge/munge.key" >> "$STATE/created"
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    wait_for 10 munged sh -c 'munge -n </dev/null | unmunge'
    started munged /run/munge/munged.pid
}

# -- MariaDB and slurmdbd -----------------------------------------------------------------
DB_PASS_FILE=$STATE/db-pass

start_mariadb() {
    if mariadb -u root -e 'SELECT 1' >/dev/null 2>&1; then
        return  # already running: used, never stopped
    fi
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$STATE/mariadb-install.log" 2>&1
    fi
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    # --skip-grant-tables is not used: root logs in through the unix socket as usual
    nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql \
        --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
        --skip-networking=0 --bind-address=127.0.0.1 \
        >"$STATE/mariadbd.log" 2>&1 &
    wait_for 60 MariaDB mariadb -u root -e 'SELECT 1'
    started mariadbd /run/mysqld/mysqld.pid
}

start_slurmdbd() {
    start_mariadb
    if [[ ! -s $DB_PASS_FILE ]]; then
        (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$DB_PASS_FILE")
    fi
    local pass
    pass=$(cat "$DB_PASS_FILE")
    mariadb -u root <<SQL
CREATE DATABASE IF NOT EXISTS $DB;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$pass';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON $DB.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
SQL
    echo "database $DB" >> "$STATE/created"
    umask 077
    cat > "$CONF_DIR/slurmdbd.conf" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=/run/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$pass
StorageLoc=$DB
EOF
    umask 022
    chown slurm:slurm "$CONF_DIR/slurmdbd.conf"
    chmod 0600 "$CONF_DIR/slurmdbd.conf"
    /usr/sbin/slurmdbd
    started slurmdbd /run/slurmdbd.pid
    wait_for 60 slurmdbd sacctmgr -n show cluster
    # slurmctld registers itself too; adding it first makes the first sacct answer at once
    sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
}

# -- slurmctld and slurmd -----------------------------------------------------------------
write_slurm_conf() {
    local accounting=$1 host node cpus mem defmem
    host=$(hostname -s)
    node=$(slurmd -C | head -1)  # NodeName=HOST CPUs=... RealMemory=MiB
    node=${node/NodeName=$(hostname)/NodeName=$host}
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    # a little less than the kernel sees (slurmd drains a node whose memory falls short)
    mem=$(( mem * 9 / 10 ))
    node=$(sed "s/RealMemory=[0-9]*/RealMemory=$mem/" <<<"$node")
    defmem=$(( mem / cpus ))
    {
        echo "$MARK"
        cat <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$defmem
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
EOF
        if [[ $accounting == yes ]]; then
            echo "AccountingStorageType=accounting_storage/slurmdbd"
            echo "AccountingStorageHost=localhost"
        else
            echo "AccountingStorageType=accounting_storage/none"
        fi
        echo "$node State=UNKNOWN"
        echo "PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP"
    } > "$CONF_DIR/slurm.conf"
    chmod 0644 "$CONF_DIR/slurm.conf"
}

node_idle() { sinfo -h -n "$(hostname -s)" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

start_slurm() {
    local accounting=$1
    install -d -o slurm -g slurm -m 0755 /var/spool/slurmctld
    install -d -m 0755 /var/spool/slurmd
    # -c: no state of an earlier cluster (jobs, node states)
    /usr/sbin/slurmctld -c
    started slurmctld /run/slurmctld.pid
    wait_for 30 slurmctld scontrol ping
    /usr/sbin/slurmd
    started slurmd /run/slurmd.pid
    wait_for 60 "the node $(hostname -s)" node_idle
}

# -- commands -----------------------------------------------------------------------------
running_setup() {
    # "yes"/"no" when a cluster started by this script is up, else nothing
    [[ -f $STATE/setup ]] && pid_alive "$(pid_of /run/slurmctld.pid)" && cat "$STATE/setup"
    return 0
}

cmd_start() {
    local accounting=no
    for arg in "$@"; do
        case $arg in
            --accounting) accounting=yes ;;
            *) die "unknown option $arg (start [--accounting])" ;;
        esac
    done
    need_root
    local cmds=(munge unmunge munged slurmctld slurmd sinfo scontrol)
    [[ $accounting == yes ]] && cmds+=(slurmdbd sacctmgr mariadb mariadbd)
    need_packages "${cmds[@]}"
    local current
    current=$(running_setup)
    if [[ $current == "$accounting" ]]; then
        say "already running (accounting: $accounting): $(sinfo -h -o '%P %D %T' | head -1)"
        say "started in 0.0 s"
        return
    fi
    if [[ -n $current || -f $STATE/started ]]; then
        cmd_stop
    fi
    if [[ -f $CONF_DIR/slurm.conf ]] && ! grep -qF "$MARK" "$CONF_DIR/slurm.conf"; then
        die "$CONF_DIR/slurm.conf exists and was not written by this script: not touching it"
    fi
    if pid_alive "$(pid_of /run/slurmctld.pid)" || pid_alive "$(pid_of /run/slurmd.pid)"; then
        die "a slurmctld or slurmd not started by this script is running"
    fi
    local t0
    t0=$(now)
    install -d -m 0700 "$STATE"
    : > "$STATE/started"
    : > "$STATE/created"
    # a start that fails half-way stops what it started
    trap 'rc=$?; if ((rc != 0)); then say "start failed: stopping what it started"; cmd_stop; fi' EXIT
    install -d -o slurm -g slurm -m 0755 "$LOGS"
    # the clients (sacctmgr too) read slurm.conf
    write_slurm_conf "$accounting"
    start_munge
    if [[ $accounting == yes ]]; then
        start_slurmdbd
    fi
    start_slurm "$accounting"
    echo "$accounting" > "$STATE/setup"
    trap - EXIT
    if [[ $accounting == yes ]]; then
        wait_for 30 "sacct" sacct -n -X -S now
    fi
    local took
    took=$(elapsed "$t0")
    echo "$took" > "$STATE/startup_s"
    say "up: node $(hostname -s), partition $PARTITION, accounting: $accounting"
    say "started in $took s"
}

stop_pid() {  # stop_pid NAME PIDFILE: SIGTERM, then SIGKILL after 15 s
    local name=$1 pid
    pid=$(pid_of "$2")
    if ! pid_alive "$pid"; then
        return
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 75); do
        pid_alive "$pid" || { rm -f "$2"; return; }
        sleep 0.2
    done
    say "$name (pid $pid) ignored SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$2"
}

drop_database() {
    if grep -q '^database' "$STATE/created" 2>/dev/null \
            && mariadb -u root -e 'SELECT 1' >/dev/null 2>&1; then
        mariadb -u root -e "DROP DATABASE IF EXISTS $DB; DROP USER IF EXISTS '$DB_USER'@'localhost';" \
            || true
        sed -i '/^database/d' "$STATE/created"
    fi
}

cmd_stop() {
    need_root
    if [[ ! -f $STATE/started ]]; then
        say "nothing to stop (no cluster started by this script)"
        return
    fi
    # jobs first, so that no job step outlives the daemons
    if pid_alive "$(pid_of /run/slurmctld.pid)"; then
        scancel --full --quiet $(squeue -h -o %A | sort -u) 2>/dev/null || true
        for _ in $(seq 50); do
            [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
            sleep 0.2
        done
    fi
    local name pidfile
    # in reverse order of starting; the database goes before MariaDB does
    while read -r name pidfile; do
        if [[ $name == mariadbd ]]; then
            drop_database
        fi
        stop_pid "$name" "$pidfile"
    done < <(tac "$STATE/started")
    drop_database  # a MariaDB this script did not start keeps running, without our database
    # job step daemons of the slurmd this script started (they outlive it when stuck)
    local steps
    steps=$(pgrep -x slurmstepd || true)
    if [[ -n $steps ]]; then
        say "killing leftover job steps: $steps"
        kill -KILL $steps 2>/dev/null || true
    fi
    for conf in slurm.conf slurmdbd.conf; do
        if [[ -f $CONF_DIR/$conf ]] && grep -qF "$MARK" "$CONF_DIR/$conf"; then
            rm -f "$CONF_DIR/$conf"
        fi
    done
    rm -rf /var/spool/slurmctld /var/spool/slurmd "$STATE"
    say "stopped"
}

cmd_status() {
    local setup
    setup=$(running_setup)
    if [[ -z $setup ]]; then
        say "not running"
        return 3
    fi
    say "running (accounting: $setup, started in $(cat "$STATE/startup_s" 2>/dev/null) s)"
    sinfo
    squeue
}

case ${1:-} in
    start) shift; cmd_start "$@" ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 start [--accounting] | stop | status" >&2; exit 2 ;;
esac
