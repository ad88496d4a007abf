#!/bin/bash
# Stand-ins for the devstack functions the gpu-nova-ext plugin calls.  Calls
# that start or install something are recorded in $CALLS; the ini functions
# edit real files (ini_tool.py), with devstack's word splitting of
# iniset_multiline's values.

STANDINS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INI_PYTHON=${INI_PYTHON:-python3}

function _record {
    echo "$*" >> "$CALLS"
}

function define_plugin {
    _record define_plugin "$@"
}

function enable_service {
    local s
    for s in "$@"; do
        if [[ ",$ENABLED_SERVICES," != *",$s,"* ]]; then
            ENABLED_SERVICES+=",$s"
        fi
    done
}

function is_service_enabled {
    local s
    for s in "$@"; do
        if [[ ",$ENABLED_SERVICES," == *",$s,"* ]]; then
            return 0
        fi
    done
    return 1
}

function trueorfalse {
    local default=$1
    local name=$2
    local value=${!name:-$default}
    case ${value,,} in
        1|yes|true|on) echo True ;;
        *) echo False ;;
    esac
}

function get_python_exec_prefix {
    echo "$FAKE_BIN_DIR"
}

function setup_develop {
    _record setup_develop "$@"
}

function iniget {
    "$INI_PYTHON" -S -E "$STANDINS_DIR/ini_tool.py" get "$@"
}

function iniget_multiline {
    # devstack prints every value, separated by spaces
    "$INI_PYTHON" -S -E "$STANDINS_DIR/ini_tool.py" getmulti "$@"
}

function iniset {
    "$INI_PYTHON" -S -E "$STANDINS_DIR/ini_tool.py" set "$@"
}

function iniset_multiline {
    local file=$1
    local section=$2
    local option=$3
    shift 3
    # devstack expands the values unquoted: they must not hold spaces
    # shellcheck disable=SC2068
    "$INI_PYTHON" -S -E "$STANDINS_DIR/ini_tool.py" setmulti "$file" "$section" \
        "$option" $@
}

function inidelete {
    "$INI_PYTHON" -S -E "$STANDINS_DIR/ini_tool.py" delete "$@"
}

# iniset_rpc_backend SERVICE FILE [SECTION [VHOST]] (lib/rpc_backend)
function iniset_rpc_backend {
    iniset "$2" "${3:-DEFAULT}" transport_url \
        "rabbit://stackrabbit:secret@192.0.2.10:5672/${4:-}"
}

# What devstack's lib/nova start_nova_compute does to the configuration
# before it starts nova-compute (after the post-config phase, before
# extra): nova-cpu.conf becomes a copy of nova.conf, then, in the default
# superconductor set-up, nova-compute is moved to the cell's message bus
# and loses the database connections.
function start_nova_compute {
    _record start_nova_compute
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    iniset_rpc_backend nova "$NOVA_CPU_CONF" DEFAULT nova_cell1
    inidelete "$NOVA_CPU_CONF" database connection
    inidelete "$NOVA_CPU_CONF" api_database connection
}

# sg GROUP -c COMMAND: COMMAND in GROUP (recorded, then run)
function sg {
    _record sg "$1"
    [[ "$2" == "-c" ]] || die "sg: -c expected"
    bash -c "$3"
}

function run_process {
    _record run_process "$@"
}

function stop_process {
    _record stop_process "$@"
}

function echo_summary {
    _record echo_summary "$@"
}

function die {
    echo "die: $*" >&2
    exit 1
}

function sudo {
    "$@"
}
