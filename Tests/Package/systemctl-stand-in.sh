#!/bin/bash
# systemctl for the runbook's Debian root, where systemd can't run as PID 1: it runs the units'
# own commands as their unit files say (User=, EnvironmentFile=, Environment=, StateDirectory=,
# ExecStartPre=, ExecStart=), Type=oneshot in the foreground, others in the background. A
# Type=notify unit counts as started once it answers /readyz on its WIMZ_LISTEN (what its READY=1
# means), or fails when its process exits first. PostgreSQL's units start Debian's clusters with
# pg_ctlcluster --skip-systemctl-redirect, as postgresql@.service does; coturn as its unit says;
# other packages' services (cron, exim4, which a
# minbase root gains as dependencies) are not started. What it starts keeps no descriptor of its
# caller's (dpkg's status pipe, a test's output): apt and the test wait for those to close.
# Every call is logged in /var/log/systemctl-calls.
echo "${DPKG_MAINTSCRIPT_PACKAGE:-none} ${DPKG_MAINTSCRIPT_NAME:-none}: $*" >> /var/log/systemctl-calls

state=/run/systemctl-stand-in
mkdir -p "$state"

unit_file() {
    for dir in /etc/systemd/system /lib/systemd/system; do
        [ -f "$dir/$1" ] && { echo "$dir/$1"; return 0; }
    done
    return 1
}

# setting FILE KEY: the values of KEY= in FILE's [Service] section, one a line.
setting() { sed -n "s/^$2=//p" "$1"; }

# detached COMMAND…: COMMAND with every descriptor above 2 closed.
detached() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null  # (the listing's own is gone already)
    done
    "$@"
}

running() { [ -f "$state/$1.pid" ] && kill -0 "$(cat "$state/$1.pid")" 2>/dev/null; }

# as_unit FILE COMMAND: COMMAND as the unit's user with the unit's environment.
as_unit() {
    file=$1 command=$2
    user=$(setting "$file" User | tail -n 1)
    script='set -a'
    # Environment= first, EnvironmentFile= after it: systemd lets the files override.
    while IFS= read -r assignment; do
        [ -z "$assignment" ] || script="$script; export $assignment"  # quoted as systemd quotes them
    done <<EOF2
$(setting "$file" Environment)
EOF2
    for env_file in $(setting "$file" EnvironmentFile); do
        case "$env_file" in -*) env_file=${env_file#-}; [ -r "$env_file" ] || continue ;; esac
        script="$script; . $env_file"
    done
    script="$script; set +a; exec $command"
    runuser -u "${user:-root}" -- sh -c "$script"
}

start() {
    unit=$1
    case "$unit" in
        postgresql*)
            # Its output to a log: the server must not hold the caller's pipes open.
            pg_lsclusters -h | while read -r version cluster _; do
                detached pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start </dev/null >> /var/log/postgresql-start.log 2>&1 || true
            done
            return 0 ;;
    esac
    case "$unit" in wimz-relay*|coturn*|haproxy*) ;; *) return 0 ;; esac
    case "$unit" in *.service) ;; *.timer|*.target|*.socket) return 0 ;; *) unit="$unit.service" ;; esac
    file=$(unit_file "$unit") || { echo "systemctl: unit $unit not found" >&2; return 5; }
    running "$unit" && return 0
    user=$(setting "$file" User | tail -n 1)
    # What systemd-tmpfiles makes at boot (/run is empty in a root): the packages' run folders.
    cat /usr/lib/tmpfiles.d/*.conf 2>/dev/null | while read -r type path mode owner group _; do
        [ "$type" = d ] && [ ! -e "$path" ] && install -d -m "$mode" -o "$owner" -g "$group" "$path"
    done
    for directory in $(setting "$file" StateDirectory); do
        install -d -o "${user:-root}" -g "${user:-root}" -m 0750 "/var/lib/$directory"
    done
    for command in "$(setting "$file" ExecStartPre)"; do
        [ -z "$command" ] || as_unit "$file" "$command" >> "/var/log/$unit.log" 2>&1 \
            || { echo "systemctl: $unit: ExecStartPre failed (/var/log/$unit.log)" >&2; return 1; }
    done
    command=$(setting "$file" ExecStart)
    if [ "$(setting "$file" Type)" = oneshot ]; then
        as_unit "$file" "$command" >> "/var/log/$unit.log" 2>&1 || { echo "systemctl: $unit failed (/var/log/$unit.log)" >&2; return 1; }
        return 0
    fi
    (detached as_unit "$file" "$command" </dev/null >> "/var/log/$unit.log" 2>&1) &
    echo $! > "$state/$unit.pid"
    if [ "$(setting "$file" Type)" = notify ] && [ "${unit#wimz-relay}" = "$unit" ]; then
        sleep 1  # another daemon: up when it is still running a moment later
        running "$unit" || { echo "systemctl: $unit exited (/var/log/$unit.log)" >&2; return 1; }
    elif [ "$(setting "$file" Type)" = notify ]; then
        listen=$(sed -n 's/^WIMZ_LISTEN=//p' /etc/wimz-relay/wimz-relay.env | tail -n 1)
        for _ in $(seq 300); do
            running "$unit" || { echo "systemctl: $unit exited (/var/log/$unit.log)" >&2; tail -n 5 "/var/log/$unit.log" >&2; return 1; }
            curl -sf "http://${listen:-127.0.0.1:8080}/readyz" >/dev/null 2>&1 && return 0
            sleep 0.1
        done
        echo "systemctl: $unit did not become ready" >&2
        return 1
    fi
}

# main_pid UNIT: the unit's main process (under the stand-in's subshell and runuser).
main_pid() {
    local shell=$1 runner main
    runner=$(pgrep -P "$shell" | head -n 1)
    main=$(pgrep -P "${runner:-0}" | head -n 1)
    echo "${main:-${runner:-$shell}}"
}

# reload UNIT: its ExecReload= commands in order, with MAINPID, as systemd runs them.
reload() {
    unit=$1
    case "$unit" in *.service) ;; *) unit="$unit.service" ;; esac
    running "$unit" || { echo "systemctl: $unit is not active, cannot reload" >&2; return 1; }
    file=$(unit_file "$unit") || return 5
    export MAINPID
    MAINPID=$(main_pid "$(cat "$state/$unit.pid")")
    while IFS= read -r command; do
        [ -z "$command" ] || as_unit "$file" "$command" >> "/var/log/$unit.log" 2>&1 \
            || { echo "systemctl: $unit: ExecReload failed (/var/log/$unit.log)" >&2; return 1; }
    done <<EOF2
$(setting "$file" ExecReload)
EOF2
}

stop() {
    unit=$1
    case "$unit" in
        postgresql*)
            pg_lsclusters -h | while read -r version cluster _ state _; do
                [ "$state" = online ] || continue
                case "$unit" in postgresql@*) [ "${unit%.service}" = "postgresql@$version-$cluster" ] || continue ;; esac
                pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" stop </dev/null >> /var/log/postgresql-start.log 2>&1 || true
            done
            return 0 ;;
    esac
    case "$unit" in *.service) ;; *) unit="$unit.service" ;; esac
    running "$unit" || return 0
    pid=$(cat "$state/$unit.pid")
    # The unit's main process is runuser's child; KillMode=mixed sends SIGTERM to the main one.
    pkill -TERM -P "$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$state/$unit.pid"
}

verb=
now=0
units=
for word in "$@"; do
    case "$word" in
        --now) now=1 ;;
        -*) ;;
        *) if [ -z "$verb" ]; then verb=$word; else units="$units $word"; fi ;;
    esac
done
status=0
case "$verb" in
    start) for u in $units; do start "$u" || status=$?; done ;;
    # Enabled is a link in multi-user.target.wants, as `enable` and Debian's presets (enable all) make it.
    enable|preset) for u in $units; do
                       case "$u" in *.*) ;; *) u="$u.service" ;; esac
                       mkdir -p /etc/systemd/system/multi-user.target.wants
                       ln -sf "/lib/systemd/system/$u" "/etc/systemd/system/multi-user.target.wants/$u"
                   done
                   [ "$now" = 0 ] || for u in $units; do start "$u" || status=$?; done ;;
    stop|kill) for u in $units; do stop "$u"; done ;;
    disable) [ "$now" = 0 ] || for u in $units; do stop "$u"; done ;;
    restart|try-restart) for u in $units; do stop "$u"; start "$u" || status=$?; done ;;
    reload) for u in $units; do
                case "$u" in wimz-relay*|coturn*|haproxy*) reload "$u" || status=$? ;; esac
            done ;;
    # The system is up (its targets active); a service is active while its process runs.
    is-active) for u in $units; do
                   case "$u" in *.target) ;; postgresql*) pg_lsclusters -h | grep -q online || status=3 ;;
                                *) running "$u" || running "$u.service" || status=3 ;; esac
               done ;;
    # Enabled as deb-systemd-helper and `enable` leave it: a link in a target's .wants folder.
    is-enabled) for u in $units; do
                    if ls /etc/systemd/system/*.wants/"$u" >/dev/null 2>&1; then echo enabled; else echo disabled; status=1; fi
                done ;;
    list-units) for f in "$state"/wimz-relay*.pid; do [ -f "$f" ] && running "$(basename "$f" .pid)" &&
                    echo "$(basename "$f" .pid) loaded active running"; done ;;
    *) ;;  # daemon-reload, preset, mask…: nothing to do without systemd
esac
exit "$status"
