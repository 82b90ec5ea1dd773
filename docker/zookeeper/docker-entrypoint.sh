#!/bin/bash
# Entrypoint of the offline ZooKeeper image: the same contract as the official
# image's docker-entrypoint.sh (https://github.com/31z4/zookeeper-docker), so
# that containers configured for one work with the other.
set -e

# Run the server as the zookeeper user unless the container was started with
# --user; root only fixes the ownership of the data directories first.
if [[ "$1" = 'zkServer.sh' && "$(id -u)" = '0' ]]; then
    chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
    exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
fi

# Generate the config only if it doesn't exist: a mounted or copied
# /conf/zoo.cfg always wins.
if [[ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]]; then
    CONFIG="$ZOO_CONF_DIR/zoo.cfg"
    {
        echo "dataDir=$ZOO_DATA_DIR"
        echo "dataLogDir=$ZOO_DATA_LOG_DIR"

        echo "tickTime=$ZOO_TICK_TIME"
        echo "initLimit=$ZOO_INIT_LIMIT"
        echo "syncLimit=$ZOO_SYNC_LIMIT"

        echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
        echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
        echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
        echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
        echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
        echo "clientPort=2181"
    } >>"$CONFIG"

    if [[ -z $ZOO_SERVERS ]]; then
        ZOO_SERVERS="server.1=localhost:2888:3888;2181"
    fi
    for server in $ZOO_SERVERS; do
        echo "$server" >>"$CONFIG"
    done

    if [[ -n $ZOO_4LW_COMMANDS_WHITELIST ]]; then
        echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >>"$CONFIG"
    fi

    for cfg_extra_entry in $ZOO_CFG_EXTRA; do
        echo "$cfg_extra_entry" >>"$CONFIG"
    done
fi

# Write myid only if it doesn't exist.
if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
    echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi

exec "$@"
