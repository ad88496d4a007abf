# SPDX-License-Identifier: Apache-2.0

"""One simulated compute host: its files, providers, agent and usage.

What nova-compute would do (create the providers, build and delete
servers: mdevs appear and disappear in the host's libvirt XML, its usage
changes) and what its gpu-nova-agent does at each cycle: discover through
libvirt's test driver and the ``simulated`` source (NVML's stand-in),
report to Placement with the real reporter, build the state payload.

Every file of a host lives in its own directory under the run's temporary
directory; host names were checked against a safe character set (see
the scenario schema, ``$defs: name``) and every path is checked to stay
inside that directory before anything is written.
"""
import copy
import dataclasses
import os
from typing import Any
import uuid
from xml.etree import ElementTree

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
import yaml

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext import conf as gconf
from gpu_nova_ext import naming
from gpu_nova_ext.simulate import scenario as scn


def inside(root: str, *parts: str) -> str:
    """``root/parts...``, refused unless it stays inside ``root``."""
    path = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([path, os.path.realpath(root)]) != \
            os.path.realpath(root):
        raise ValueError('%s is outside the run directory %s'
                         % (path, root))
    return path


@dataclasses.dataclass
class Instance:
    """A server nova-compute built here, for its delete."""

    uuid: str
    flavor: scn.Flavor
    allocations: dict[str, int]            # provider -> amount
    mdevs: list[tuple[str, str]]           # (parent address, mdev uuid)


class SimulatedHost:
    """One compute host (see the module docstring)."""

    def __init__(self, spec: scn.Host, workdir: str, endpoint: str):
        self.spec = spec
        self.name = spec.name
        self.dir = inside(workdir, 'hosts', spec.name)
        os.makedirs(self.dir)
        self.xml_path = inside(self.dir, 'host.xml')
        self.gpus_path = inside(self.dir, 'gpus.yaml')
        self.nova_conf_path = inside(self.dir, 'nova.conf')
        self.xml = ElementTree.fromstring(spec.xml_text)
        # the host's own copy: events change it (YAML anchors and host
        # kinds share the scenario's records)
        self.facts = {addr: copy.deepcopy(f)
                      for addr, f in spec.gpus.items()}
        self.endpoint = endpoint
        self.root_uuid: str | None = None
        self.nodename = spec.name
        # provider uuid -> GPU address, and GPU address -> providers
        self.gpu_of_provider: dict[str, str] = {}
        self.providers_of_gpu: dict[str, list[str]] = {}
        # provider uuid -> (PCI function it stands for, its resource
        # class, its total) of the GPU providers nova-compute created
        self.providers: dict[str, tuple[str, str, int]] = {}
        #: provider uuid -> GPU units of one of its vGPUs, for the VFs of
        #: MIG-laid-out GPUs (compute slices of the instance / the GPU's)
        self.provider_units: dict[str, float] = {}
        self.offered: dict[str, str] = {}        # function -> mdev type
        self.used = {'vcpus': 0, 'memory_mb': 0, 'disk_gb': 0,
                     'instances': 0}
        self.pci_pools: list[dict[str, Any]] = []
        self.instances: dict[str, Instance] = {}
        self.conf: cfg.ConfigOpts | None = None
        self.client = None
        self.reporter = None
        self.payload: dict[str, Any] | None = None
        self.inventory = None
        self.agent_up = True
        # the agent's protocol 1.1 message sequence
        self.publisher = agent_payload.Publisher()
        self.last_cast = 0.0
        #: the agent's health judge (:mod:`.agent_health`), when running
        self.health = None
        self._caps = self._index_caps()

    def _index_caps(self) -> dict[str, Any]:
        caps = {}
        for device in self.xml.findall('device'):
            cap = device.find("capability[@type='pci']")
            if cap is None:
                continue
            addr = '%04x:%02x:%02x.%x' % tuple(
                int(cap.findtext(tag), 0)
                for tag in ('domain', 'bus', 'slot', 'function'))
            caps[addr] = cap
        return caps

    # -- files the agent reads -------------------------------------------

    def write_files(self) -> None:
        self._fill_vgpu_facts()
        self.save_state()
        self._write_nova_conf()

    def agent_conf(self) -> cfg.ConfigOpts:
        """The agent's options, set in memory (no file to inject into)."""
        from gpu_nova_ext import messaging
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        messaging.register_messaging_opts(conf)
        conf([], project='gpu-nova-ext', default_config_files=[],
             default_config_dirs=[])
        # the options of the auth plugin, as keystoneauth registers them
        # when it reads a config file naming auth_type
        conf.register_opts(ks_loading.get_auth_plugin_conf_options(
            'admin_token'), group='placement')
        for name, value, group in (
                ('host', self.name, None),
                ('mode', self.spec.agent_mode, 'agent'),
                ('libvirt_uri', 'test://' + self.xml_path, 'agent'),
                ('inventory_sources', ['libvirt', 'simulated'], 'agent'),
                ('simulated_gpus_file', self.gpus_path, 'agent'),
                ('nova_config_file', self.nova_conf_path, 'agent'),
                ('nova_config_dir', inside(self.dir, 'nova.conf.d'),
                 'agent'),
                ('prometheus_port', 0, 'agent'),
                ('auth_type', 'admin_token', 'placement'),
                ('endpoint', self.endpoint, 'placement'),
                ('token', 'admin', 'placement'),
                ('max_request_retries', 0, 'placement')):
            conf.set_override(name, value, group)
        return conf

    def _fill_vgpu_facts(self) -> None:
        """Give each GPU the vGPU types NVML would list for it.

        The libvirt XML knows how many instances of a type are available;
        NVML knows the most a GPU can hold.  At the start nothing is used,
        so a type's ``availableInstances`` is its maximum, unless the
        scenario lists ``vgpu_types`` itself.
        """
        for func in self.spec.pci_functions:
            if func.address not in self.facts or not func.mdev_types:
                continue
            facts = self.facts[func.address]
            listed = {t.get('id') for t in facts.get('vgpu_types') or []}
            for mdev_type in self._mdev_types(func.address):
                if mdev_type['id'] in listed:
                    continue
                facts.setdefault('vgpu_types', []).append({
                    'id': mdev_type['id'], 'name': mdev_type['name'],
                    'max': mdev_type['available']})

    def _mdev_types(self, address: str) -> list[dict[str, Any]]:
        cap = self._caps[address]
        out = []
        for t in cap.findall("capability[@type='mdev_types']/type"):
            out.append({'id': t.get('id'), 'name': t.findtext('name'),
                        'available': int(t.findtext('availableInstances')
                                         or 0), 'element': t})
        return out

    def _write_nova_conf(self) -> None:
        """The host's nova.conf vGPU part, as an operator writes it."""
        self.offered = {}
        lines = []
        if self.spec.nova_gpu_mode == 'vgpu':
            by_type: dict[str, list[str]] = {}
            for func in self.spec.pci_functions:
                for mdev_type in self.spec.enabled_mdev_types:
                    if mdev_type in func.mdev_types:
                        by_type.setdefault(mdev_type, []).append(
                            func.address)
                        self.offered[func.address] = mdev_type
                        break
            lines += ['[devices]', 'enabled_mdev_types = %s'
                      % ','.join(self.spec.enabled_mdev_types)]
            rc = self.spec.vgpu_resource_class
            if (len(self.spec.enabled_mdev_types) > 1 or rc or
                    self.spec.mig_types):
                for mdev_type, addresses in by_type.items():
                    lines += ['[mdev_%s]' % mdev_type,
                              'device_addresses = %s' % ','.join(addresses)]
                    type_rc = self._mdev_class(mdev_type)
                    lines += ['mdev_class = %s' % type_rc] if type_rc else []
        with open(self.nova_conf_path, 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')

    def _mdev_class(self, mdev_type: str) -> str | None:
        """``[mdev_<type>] mdev_class``: a MIG type's per-profile class."""
        mig = self.spec.mig_types.get(mdev_type)
        return mig.resource_class if mig else self.spec.vgpu_resource_class

    def save_state(self) -> None:
        """Write the host XML and simulated GPU facts as they are now."""
        ElementTree.ElementTree(self.xml).write(self.xml_path,
                                                encoding='unicode')
        with open(self.gpus_path, 'w', encoding='utf-8') as f:
            yaml.dump(self.facts, f, Dumper=_Dumper, sort_keys=True)

    # -- what nova-compute would do ---------------------------------------

    def create_providers(self, client) -> None:
        """Providers as nova-compute's libvirt driver creates them."""
        import os_traits

        from gpu_nova_ext.simulate import compute_providers
        spec = self.spec
        self.root_uuid = compute_providers.create_compute_node(
            client, self.nodename, vcpus=spec.vcpus,
            memory_mb=spec.memory_mb, disk_gb=spec.disk_gb,
            cpu_allocation_ratio=spec.cpu_allocation_ratio,
            reserved_host_memory_mb=0,
            traits=(tuple(compute_providers.COMPUTE_TRAITS) +
                    (os_traits.OWNER_NOVA,)))
        if spec.nova_gpu_mode == 'vgpu':
            for address, mdev_type in sorted(self.offered.items()):
                total = next(t['available'] for t in self._mdev_types(address)
                             if t['id'] == mdev_type)
                rc = self._mdev_class(mdev_type) or 'VGPU'
                rp = compute_providers.create_pgpu_provider(
                    client, self.nodename, self.root_uuid, address, total,
                    resource_class=rc)
                self.providers[rp] = (address, rc, total)
                if mdev_type in spec.mig_types:
                    self.provider_units[rp] = spec.mig_types[mdev_type].units
                func = spec.function(address)
                self._add_provider(func.parent or address, rp)
        elif spec.nova_gpu_mode == 'pci':
            for func in spec.pci_functions:
                if not func.is_gpu or func.vendor_id not in (
                        naming.VENDOR_IDS):
                    continue
                rc = (spec.pci_resource_class or
                      compute_providers.pci_resource_class(
                          func.vendor_id, func.product_id))
                rp = compute_providers.create_pci_provider(
                    client, self.nodename, self.root_uuid, func.address,
                    vendor_id=func.vendor_id, product_id=func.product_id,
                    resource_class=rc, traits=spec.pci_traits)
                self.providers[rp] = (func.address, rc, 1)
                self._add_provider(func.address, rp)
                # the PCI tracker's pool of this device, as nova-compute
                # reports it in ComputeNode.pci_device_pools
                self.pci_pools.append({
                    'vendor_id': func.vendor_id,
                    'product_id': func.product_id,
                    'numa_node': func.numa_node, 'count': 1,
                    'tags': {'dev_type': 'type-PCI', 'rp_uuid': rp,
                             'resource_class': rc}})

    def _add_provider(self, address: str, rp: str) -> None:
        self.gpu_of_provider[rp] = address
        self.providers_of_gpu.setdefault(address, []).append(rp)

    def _add_usage(self, flavor: scn.Flavor, sign: int) -> None:
        self.used['vcpus'] += sign * flavor.vcpus
        self.used['memory_mb'] += sign * flavor.ram_mb
        self.used['disk_gb'] += sign * flavor.disk_gb
        self.used['instances'] += sign

    def consume(self, flavor: scn.Flavor, allocations: dict,
                instance_uuid: str) -> list[str]:
        """The host after nova-compute built the server; its GPUs."""
        self._add_usage(flavor, 1)
        instance = Instance(uuid=instance_uuid, flavor=flavor,
                            allocations={}, mdevs=[])
        gpus = []
        for rp, alloc in allocations.items():
            address = self.gpu_of_provider.get(rp)
            if address is None:
                continue
            amount = max(alloc['resources'].values())
            instance.allocations[rp] = amount
            gpus.append(address)
            function = self.providers.get(rp, (address,))[0]
            if function in self.offered:
                for _ in range(amount):
                    instance.mdevs.append(self._create_mdev(
                        function, self.offered[function], instance_uuid,
                        len(instance.mdevs)))
            for pool in self.pci_pools:
                if pool['tags']['rp_uuid'] == rp:
                    pool['count'] = max(0, pool['count'] - amount)
        self.instances[instance_uuid] = instance
        return sorted(set(gpus))

    def release(self, instance_uuid: str) -> None:
        """The host after nova-compute deleted the server."""
        instance = self.instances.pop(instance_uuid)
        self._add_usage(instance.flavor, -1)
        for parent, mdev_uuid in instance.mdevs:
            self._remove_mdev(parent, mdev_uuid)
        for rp, amount in instance.allocations.items():
            for pool in self.pci_pools:
                if pool['tags']['rp_uuid'] == rp:
                    pool['count'] += amount

    def _available(self, address: str, mdev_type: str, delta: int) -> None:
        for t in self._mdev_types(address):
            if t['id'] == mdev_type:
                t['element'].find('availableInstances').text = str(
                    max(0, t['available'] + delta))

    def _create_mdev(self, address: str, mdev_type: str, instance_uuid: str,
                     index: int) -> tuple[str, str]:
        """An mdev on ``address``, as libvirt then lists it."""
        self._available(address, mdev_type, -1)
        mdev_uuid = str(uuid.uuid5(uuid.UUID(instance_uuid), str(index)))
        device = ElementTree.SubElement(self.xml, 'device')
        ElementTree.SubElement(device, 'name').text = 'mdev_%s_%s' % (
            mdev_uuid.replace('-', '_'), address.replace(':', '_').replace(
                '.', '_'))
        ElementTree.SubElement(device, 'parent').text = 'pci_%s' % (
            address.replace(':', '_').replace('.', '_'))
        cap = ElementTree.SubElement(device, 'capability', type='mdev')
        ElementTree.SubElement(cap, 'type', id=mdev_type)
        ElementTree.SubElement(cap, 'uuid').text = mdev_uuid
        return address, mdev_uuid

    def _remove_mdev(self, address: str, mdev_uuid: str) -> None:
        for device in self.xml.findall('device'):
            if device.findtext("capability[@type='mdev']/uuid") == mdev_uuid:
                self.xml.remove(device)
                break
        self._available(address, self.offered[address], 1)

    def apply_event(self, event) -> None:
        facts = self.facts.setdefault(event.gpu, {})
        if event.health is not None:
            facts['health'] = {'state': event.health,
                               'reasons': list(event.reasons)}
        if event.metrics:
            facts.setdefault('metrics', {}).update(event.metrics)

    # -- the agent ---------------------------------------------------------

    def start_agent(self, mount) -> None:
        """The agent's Placement client and reporter.

        ``mount(session)`` connects a keystoneauth session to the embedded
        Placement.
        """
        from gpu_nova_ext.placement import client as pclient
        from gpu_nova_ext.placement import reporter
        self.conf = self.agent_conf()
        self.client = pclient.PlacementClient(self.conf)
        # the client's keystoneauth adapter: its session is where a
        # transport adapter is mounted
        mount(self.client._adapter.session)
        self.reporter = reporter.Reporter(self.conf, self.client)

    def cycle(self, now: float) -> tuple[Any, dict[str, Any]]:
        """One agent cycle at simulated time ``now``.

        Discover, report to Placement, build the state payload.
        """
        from gpu_nova_ext.inventory import manager
        self.save_state()
        inventory = manager.discover(self.conf,
                                     sources=['libvirt', 'simulated'])
        self._power_profiles(inventory)
        if self.health is not None:
            self.health.apply(inventory)
        result = self.reporter.report(inventory)
        self.inventory = inventory
        self.payload = agent_payload.build_payload(
            inventory, host=self.name, nodename=result.nodename,
            root_provider_uuid=result.root_provider_uuid,
            mode=self.conf.agent.mode, now=now)
        # the providers the agent found for each GPU (nova-compute's, or
        # its own in inventory mode)
        for gpu in inventory.gpus:
            for rp in gpu.provider_uuids:
                if rp not in self.gpu_of_provider:
                    self._add_provider(gpu.pci_address, rp)
        return result, self.payload

    def _power_profiles(self, inventory) -> None:
        """The host kind's ``power:``, as the agent's power policy notes it.

        The agent sets the limit through NVML and, once set, reports the
        profile in the GPU state (what ``GpuPowerProfileFilter`` reads);
        the simulated GPUs take any limit, so every GPU of a profiled model
        reports its profile.
        """
        from gpu_nova_ext.agent import power_policy
        for gpu in inventory.gpus:
            profile = power_policy.profile_for(self.spec.power_profiles,
                                               gpu.model)
            if profile is not None and gpu.vendor in ('nvidia', 'amd'):
                gpu.power_profile = profile.name


class _Dumper(getattr(yaml, 'CSafeDumper', yaml.SafeDumper)):
    """The C safe dumper when PyYAML has it (the facts are plain data)."""
