#!/usr/bin/env bash
# Make sure the real services the demo and the tests use answer on loopback:
# RabbitMQ always; MariaDB and PostgreSQL unless only "rabbitmq" is asked for.
# Installs a missing server from Debian's packages (as root), starts a
# stopped one, and waits until it answers. Idempotent.
#
#   tools/start-services.sh             # RabbitMQ, MariaDB, PostgreSQL
#   tools/start-services.sh rabbitmq    # just RabbitMQ (the demo)
set -euo pipefail

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(rabbitmq mariadb postgresql)

answers() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

apt_updated=
apt_install() {
    if [ -z "$apt_updated" ]; then
        apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() {  # name port
    for _ in $(seq 1 90); do
        answers "$2" && { echo "$1 answers on 127.0.0.1:$2"; return 0; }
        sleep 1
    done
    echo "$1 did not start on 127.0.0.1:$2" >&2
    return 1
}

start_rabbitmq() {
    answers 5672 && { echo "rabbitmq answers on 127.0.0.1:5672"; return; }
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    rabbitmq-server -detached || true
    wait_for rabbitmq 5672
}

start_mariadb() {
    answers 3306 && { echo "mariadb answers on 127.0.0.1:3306"; return; }
    [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    wait_for mariadb 3306
}

start_postgresql() {
    answers 5432 && { echo "postgresql answers on 127.0.0.1:5432"; return; }
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
    wait_for postgresql 5432
}

for service in "${wanted[@]}"; do
    "start_$service"
done
