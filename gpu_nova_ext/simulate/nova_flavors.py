# SPDX-License-Identifier: Apache-2.0

"""Flavors as nova-api stores and checks them.

A scenario's flavor becomes a real ``nova.objects.Flavor``; its extra
specs pass nova-api's extra spec validators (``gpu:`` included, through
our validator plugin) and its PCI aliases turn into PCI requests as
nova-api turns them at boot.
"""
from typing import Any

from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import scenario as scn


def check_flavors(scenario: scn.Scenario) -> None:
    """Validate every flavor as nova-api (microversion >= 2.86) would.

    Runs Nova's extra spec validators (ours for ``gpu:`` among them) and
    turns each PCI alias into PCI requests as nova-api does at boot, so a
    bad key, value or undefined alias stops the scenario before any boot.
    """
    nova_config.load_nova()
    from nova.api.validation.extra_specs import validators
    from nova import exception as nova_exc
    for name, flavor in scenario.flavors.items():
        for key, value in flavor.extra_specs.items():
            try:
                validators.validate(key, value)
            except nova_exc.ValidationError as exc:
                raise scenario.error(
                    'flavors (%s).extra_specs[%s]' % (name, key),
                    'nova-api would reject it: %s Fix the key or value.'
                    % exc.format_message())
        try:
            pci_requests(make_flavor(flavor))
        except (nova_exc.PciRequestAliasNotDefined,
                nova_exc.PciInvalidAlias, nova_exc.Invalid) as exc:
            raise scenario.error(
                'flavors (%s).extra_specs' % name,
                '%s. Define the alias under nova_conf: pci: alias: (name, '
                'resource_class) or fix the extra spec.'
                % exc.format_message())


def make_flavor(flavor: scn.Flavor, flavor_id: int = 1) -> Any:
    """A ``nova.objects.Flavor`` as nova-api stores it."""
    nova_config.load_nova()
    from nova import objects
    return objects.Flavor(
        id=flavor_id, flavorid=flavor.name, name=flavor.name,
        vcpus=flavor.vcpus, memory_mb=flavor.ram_mb,
        root_gb=flavor.disk_gb, ephemeral_gb=0, swap=0,
        rxtx_factor=1.0, vcpu_weight=0, is_public=True, disabled=False,
        extra_specs=dict(flavor.extra_specs), description=None)


def pci_requests(flavor):
    from nova.pci import request as pci_request
    return pci_request.get_pci_requests_from_flavor(flavor)
