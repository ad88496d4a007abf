#!/bin/bash
# gpu-nova-ext devstack plugin: a phase dispatcher; the work is in
# lib/gpu_nova_ext.

GPU_NOVA_EXT_PLUGIN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$GPU_NOVA_EXT_PLUGIN_DIR/lib/gpu_nova_ext"

if is_service_enabled gpu-nova-ext; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing gpu-nova-ext"
        install_gpu_nova_ext
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring gpu-nova-ext"
        configure_gpu_nova_ext
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        echo_summary "Starting gpu-nova-ext"
        start_gpu_nova_ext
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_gpu_nova_ext
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_gpu_nova_ext
    fi
fi
