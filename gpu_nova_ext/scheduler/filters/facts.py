# SPDX-License-Identifier: Apache-2.0

"""The GPU filters that judge one fact of each GPU.

Each gives a request's constraint (None: none), the family of GPU facts
it judges (``records.FAMILY_*``) and whether one fact passes.
"""
from gpu_nova_ext import naming
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.state import records


def _version(version):
    return '.'.join(str(p) for p in version) if version else 'any'


class GpuModelFilter(filtering.GpuFilter):
    """Enforce gpu:model, gpu:vendor, gpu:mode and gpu:vgpu_type.

    ``A100`` matches ``A100_80GB_PCIE``, not ``A1000``; ``T4`` matches
    ``TESLA_T4``.  Unknown ``gpu:`` keys reject the request's hosts.
    """

    FAMILY = records.FAMILY_MODEL

    def constraint(self, req):
        # the GpuRequest itself: models, vendor, mode and vgpu_types
        return req if (req.models or req.vendor or req.mode
                       or req.vgpu_types) else None

    def describe(self, constraint):
        return 'model %s, vendor %s, mode %s, vGPU type %s' % (
            ','.join(constraint.models) or 'any', constraint.vendor or 'any',
            constraint.mode or 'any',
            ','.join(sorted(constraint.vgpu_types or ())) or 'any')

    def fact_passes(self, fact, constraint):
        # fact: records.GpuFacts.fact(FAMILY_MODEL)
        vendor, model, mode, vgpu_types = fact
        if constraint.vendor and vendor != constraint.vendor:
            return False
        if constraint.models and not (model and any(
                naming.normalized_model_matches(m, model)
                for m in constraint.models)):
            return False
        if constraint.mode == naming.MODE_VGPU:
            if mode not in records.VGPU_MODES:
                return False
        elif constraint.mode and mode != constraint.mode:
            return False
        return not (constraint.vgpu_types
                    and constraint.vgpu_types.isdisjoint(vgpu_types))


class GpuMemoryFilter(filtering.GpuFilter):
    """Keep GPUs with ``gpu:memory_min`` (a vGPU's: its framebuffer)."""

    FAMILY = records.FAMILY_MEMORY

    def constraint(self, req):
        return req.memory_min_mib

    def describe(self, constraint):
        return 'memory >= %d MiB' % constraint

    def fact_passes(self, fact, constraint):
        return fact is not None and fact >= constraint


class GpuCapabilityFilter(filtering.GpuFilter):
    """Enforce gpu:cuda_cc_min and gpu:driver_min (part by part)."""

    FAMILY = records.FAMILY_CAPABILITY

    def constraint(self, req):
        # (least CUDA capability, least driver), each None for any
        need = (req.cuda_cc_min, req.driver_min)
        return None if need == (None, None) else need

    def describe(self, constraint):
        return 'CUDA compute capability >= %s, driver >= %s' % tuple(
            _version(v) for v in constraint)

    def fact_passes(self, fact, constraint):
        # fact: records.GpuFacts.fact(FAMILY_CAPABILITY), the same order
        for have, need in zip(fact, constraint):
            if need is not None and (have is None or have < need):
                return False
        return True


class GpuHealthFilter(filtering.GpuFilter):
    """Keep GPUs healthy enough: ``gpu:health`` (default ``healthy``)."""

    FAMILY = records.FAMILY_HEALTH

    def constraint(self, req):
        max_rank = request.HEALTH_MAX_RANK[req.health]
        return None if max_rank >= 2 else max_rank

    def describe(self, constraint):
        return 'health %s' % ('healthy' if constraint == 0
                              else 'healthy or degraded')

    def fact_passes(self, fact, constraint):
        # fact: the GPU's health rank (0 healthy, 1 degraded, 2 unhealthy)
        return fact <= constraint


class GpuPowerProfileFilter(filtering.GpuFilter):
    """Keep GPUs under the power profile their agent applied."""

    def constraint(self, req):
        return req.power_profile

    def describe(self, constraint):
        return 'power profile %s' % constraint

    def fact_passes(self, fact, constraint):
        return fact == constraint

    def fact_groups(self, record):
        # a fact no other filter judges: read per GPU, not as a family
        return ((gpu.source.get('power_profile'), gpu.provider_uuids)
                for gpu in record.gpus)


class GpuReservationFilter(filtering.GpuFilter):
    """Keep the GPUs reserved for another project out of a request.

    Design doc: Reservations.  For every GPU request this drops the
    candidates that draw from a GPU reserved (``reserved_for``) for a
    project other than the request's.
    """

    FAMILY = records.FAMILY_RESERVATION

    def constraint(self, req):
        return ''

    def request_constraint(self, ctx):
        # every GPU request, constrained or not; '': no project
        return ctx.project_id or ''

    def describe(self, constraint):
        return 'a GPU not reserved for another project than %s' % (
            constraint or '(no project)')

    def fact_passes(self, fact, constraint):
        # fact: the project the GPU is reserved for, None when it is not
        return fact is None or fact == constraint
