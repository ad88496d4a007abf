# SPDX-License-Identifier: Apache-2.0

"""nova-compute, its own process, on Nova's fakelibvirt.

    python -m gpu_nova_ext_dev.cloud.compute HOST.yaml AGENT.xml \
        --config-file nova.conf ...

Everything after the two paths is nova-compute's command line.  The
hypervisor is the one stand-in: the stubs are those of Nova's own
functional libvirt tests (``nova.tests.functional.libvirt.base.
ServersTestBase.setUp`` and ``test_vgpu.VGPUTestBase.setUp``, Nova 34),
applied here as the same fixtures, plus fakelibvirt's connection built
from the host's description (:mod:`.hosts`).  One stub is ours, in their
place: the image backend makes each server's disk files (:func:`_make_disks`),
so that stop and start, hard reboot, resize and cold migration, which read
and move those files, run Nova's own code.  While it runs, the host's
node devices (and the mdevs nova-compute created) are written to
``AGENT.xml`` for the agent's ``test:///`` libvirt URI whenever they
change.
"""
import os
import sys

# Nova's services run on native threads (no eventlet), as in production
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

import errno  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402

import fixtures  # noqa: E402
from nova.cmd import compute as nova_compute  # noqa: E402
from nova.tests import fixtures as nova_fixtures  # noqa: E402
from nova.tests.fixtures import libvirt as fakelibvirt  # noqa: E402
from nova.virt.libvirt import utils as libvirt_utils  # noqa: E402
from oslo_utils import units  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402
import yaml  # noqa: E402

from gpu_nova_ext_dev.cloud import hosts  # noqa: E402

XML_INTERVAL = 0.5


def _stub_hypervisor(conn: fakelibvirt.Connection) -> None:
    """Nova's functional-test libvirt stubs, for this process's life."""
    for fixture in (
            nova_fixtures.PrivsepFixture(),
            nova_fixtures.LibvirtImageBackendFixture(),
            nova_fixtures.CGroupsFixture(),
            nova_fixtures.LibvirtFixture(),
            nova_fixtures.OSBrickFixture(),
            fixtures.MockPatch(
                'nova.virt.libvirt.LibvirtDriver._create_image',
                autospec=True, side_effect=_make_disks),
            fixtures.MockPatch(
                'nova.virt.libvirt.LibvirtDriver._get_local_gb_info',
                return_value={'total': 128, 'used': 44, 'free': 84}),
            fixtures.MockPatch(
                'nova.virt.libvirt.driver.libvirt_utils.is_valid_hostname',
                return_value=True),
            fixtures.MockPatch(
                'nova.virt.libvirt.driver.libvirt_utils.file_open',
                side_effect=lambda *a, **k: io.BytesIO(b'')),
            fixtures.MockPatch(
                'nova.privsep.utils.supports_direct_io', return_value=True),
            fixtures.MockPatch(
                'nova.virt.libvirt.host.Host.get_online_cpus',
                return_value=set(range(16))),
            fixtures.MockPatch(
                'nova.virt.libvirt.host.Host.get_connection',
                return_value=conn),
            # the kernel's mdev creation: a new mdev on the fake host
            fixtures.MockPatch(
                'nova.virt.libvirt.driver.LibvirtDriver._create_mdev',
                side_effect=lambda dev_name, mdev_type, uuid=None:
                _create_mdev(conn, dev_name, mdev_type, uuid)),
            # no host sysfs (Nova's PCI functional tests)
            fixtures.MockPatch(
                'nova.pci.utils.is_physical_function', return_value=False),
            fixtures.MockPatch(
                'nova.pci.utils.get_function_by_ifname',
                return_value=(None, False)),
    ):
        fixture.setUp()


def _make_disks(driver, context, instance, disk_mapping, injection_info=None,
                suffix='', disk_images=None, block_device_info=None,
                fallback_from_host=None, ignore_bdi_for_swap=False):
    """The image backend's part of ``LibvirtDriver._create_image``.

    What the raw backend (``[libvirt] images_type = raw``, the cloud's
    setting) leaves in the instance directory, less the image's bytes:
    the root disk and any ephemeral disk as sparse files of the flavor's
    size, grown to a larger flavor's size on resize, never shrunk.  The
    domain XML of Nova's image-backend fixture names these paths (raw
    format), so Nova's driver finds real files when it sizes, renames and
    copies a server's disks.  Returns what ``_create_image`` returns.
    """
    path = libvirt_utils.get_instance_path(instance)
    made_dir = not os.path.exists(path)
    os.makedirs(path, exist_ok=True)
    flavor = instance.get_flavor()
    sizes = {'disk': flavor.root_gb, 'disk.local': flavor.ephemeral_gb}
    made = False
    for name, gib in sizes.items():
        if name not in disk_mapping or not gib:
            continue
        disk = os.path.join(path, name + suffix)
        with open(disk, 'ab'):
            pass
        if os.path.getsize(disk) < gib * units.Gi:
            os.truncate(disk, gib * units.Gi)
        made = True
    return made_dir, made


def _create_mdev(conn, dev_name, mdev_type, uuid=None):
    """The kernel's part: a new mdev, one instance of its type less free.

    fakelibvirt's pGPUs keep ``availableInstances`` fixed, so Nova's VGPU
    inventory (the mdevs plus that count) grew with every server and
    offered more vGPUs than the GPU holds.
    """
    parent = conn.pci_info.devices[dev_name]
    found = re.search(r"<type id='%s'>.*?<availableInstances>(\d+)<"
                      % re.escape(mdev_type), parent.pci_device, re.S)
    if found is None or found.group(1) == '0':
        raise OSError(errno.ENOSPC, 'no %s instance left on %s'
                      % (mdev_type, dev_name))
    parent.pci_device = '%s%d%s' % (
        parent.pci_device[:found.start(1)], int(found.group(1)) - 1,
        parent.pci_device[found.end(1):])
    uuid = uuid or uuidutils.generate_uuid()
    name = libvirt_utils.mdev_uuid2name(uuid)
    conn.mdev_info.devices[name] = fakelibvirt.FakeMdevDevice(
        dev_name=name, type_id=mdev_type, parent=dev_name)
    return uuid


def _publish_xml(conn, info, path: str, stop: threading.Event) -> None:
    """Keep the agent's test-driver XML equal to this host's devices."""
    last = None
    while True:
        xml = hosts.test_xml(info, conn.mdev_info, counted=True)
        if xml != last:
            tmp = path + '.tmp'
            with open(tmp, 'w') as f:
                f.write(xml)
            os.replace(tmp, path)
            last = xml
        if stop.wait(XML_INTERVAL):
            return


def main() -> None:
    host_file, xml_path = sys.argv[1:3]
    with open(host_file) as f:
        desc = yaml.safe_load(f)
    info = hosts.pci_info(desc)
    conn = hosts.connection(desc, info)
    _stub_hypervisor(conn)
    stop = threading.Event()
    threading.Thread(target=_publish_xml, args=(conn, info, xml_path, stop),
                     name='agent-xml', daemon=True).start()
    sys.argv = ['nova-compute'] + sys.argv[3:]
    try:
        nova_compute.main()
    finally:
        stop.set()


if __name__ == '__main__':
    main()
