#!/bin/bash -xe
# Prepare MariaDB/MySQL and PostgreSQL for the opportunistic database tests
# of oslo.db: the user openstack_citest (password openstack_citest) and the
# database openstack_citest on each. The tests create and drop databases of
# random names next to it, hence the broad rights. Run as root; running it
# again changes nothing.
#
# MariaDB: root logs in through its socket without a password (mysql -uroot).
# PostgreSQL: the postgres superuser, or root when it is a superuser, logs
# in through the socket (trust or peer authentication).

DB_USER=openstack_citest
DB_PW=openstack_citest
DB_NAME=openstack_citest

mysql_root() {
    mysql -uroot "$@"
}

mysql_root -e "
    CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PW';
    CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PW';
    ALTER USER '$DB_USER'@'%' IDENTIFIED BY '$DB_PW';
    ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PW';
    GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'%' WITH GRANT OPTION;
    GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'localhost' WITH GRANT OPTION;
    FLUSH PRIVILEGES;
    CREATE DATABASE IF NOT EXISTS $DB_NAME CHARACTER SET utf8mb4;"

pg_admin() {
    if id postgres >/dev/null 2>&1; then
        runuser -u postgres -- psql -v ON_ERROR_STOP=1 -d postgres "$@"
    else
        psql -v ON_ERROR_STOP=1 -d postgres "$@"
    fi
}

pg_admin -c "
    DO \$\$
    BEGIN
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER') THEN
            ALTER ROLE $DB_USER WITH SUPERUSER LOGIN PASSWORD '$DB_PW';
        ELSE
            CREATE ROLE $DB_USER WITH SUPERUSER LOGIN PASSWORD '$DB_PW';
        END IF;
    END
    \$\$;"

if [ -z "$(pg_admin -tAc "SELECT 1 FROM pg_database
                          WHERE datname = '$DB_NAME'")" ]; then
    pg_admin -c "CREATE DATABASE $DB_NAME OWNER $DB_USER
                 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'
                 TEMPLATE template0"
fi

# Check both logins the way the tests make them: by password over TCP.
mysql -u"$DB_USER" -p"$DB_PW" -h 127.0.0.1 "$DB_NAME" -e 'SELECT 1' >/dev/null
PGPASSWORD=$DB_PW psql -h 127.0.0.1 -U "$DB_USER" -d "$DB_NAME" \
    -c 'SELECT 1' >/dev/null
