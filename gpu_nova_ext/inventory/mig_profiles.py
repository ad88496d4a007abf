# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""NVIDIA's MIG GPU-instance profiles per board, as documented.

Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
supported-mig-profiles.html), read 2026-12-02: the A30-24GB table, the
A100-SXM4-40GB table and its note on the 80GB names, and the H100, H200
and B200 tables (profile names, fraction of memory and SMs, number of
instances).  The profile IDs and placements are those of
``nvidia-smi mig -lgip`` / ``-lgipp`` (NVML's ``info.id`` and
``nvmlDeviceGetGpuInstancePossiblePlacements_v2``) on these boards: the
guide's placement diagrams, in memory slices.

What the guide does not give and this table derives (so only a real
driver confirms it; ``tools/device-check`` prints what the driver says):
``memory_mib`` (memory slices x the 1g profile's size, from the name's
rounding), and SM counts (not kept here).

A layout (:mod:`gpu_nova_ext.agent.mig_layout`) is checked against this
table when the agent starts; when it applies one, the agent asks the
driver (profile info, placements), so a driver that differs wins there.
"""
import dataclasses

# NVML's GPU-instance profile indexes (the ``profile`` argument of
# nvmlDeviceGetGpuInstanceProfileInfo; nvml.h's
# NVML_GPU_INSTANCE_PROFILE_*).  Written out, not read from pynvml, so
# that the operator CLI needs no NVML; a unit test compares them.
P1 = 0x0        # _1_SLICE
P2 = 0x1        # _2_SLICE
P3 = 0x2        # _3_SLICE
P4 = 0x3        # _4_SLICE
P7 = 0x4        # _7_SLICE
P1_ME = 0x7     # _1_SLICE_REV1 (+me: media extensions)
P2_ME = 0x8     # _2_SLICE_REV1
P1_2X = 0x9     # _1_SLICE_REV2 (1 compute slice, 2 memory slices)


@dataclasses.dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of a board (a row of ``-lgip``)."""

    name: str                 # '1g.10gb' (nvidia-smi spells 'MIG 1g.10gb')
    nvml_index: int           # NVML_GPU_INSTANCE_PROFILE_*
    profile_id: int           # info.id, the ID ``-lgip`` prints
    compute_slices: int
    memory_slices: int        # a placement's size
    max_instances: int
    starts: tuple[int, ...]   # possible placements' starts
    memory_mib: int


@dataclasses.dataclass(frozen=True)
class MigBoard:
    """The MIG geometry of one board."""

    key: str
    #: normalized models (``naming.normalize_model``) with this geometry
    models: tuple[str, ...]
    compute_slices: int
    memory_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        name = name.strip().lower()
        if name.startswith('mig '):
            name = name[4:]
        for p in self.profiles:
            if p.name == name:
                return p
        return None

    def by_index(self, nvml_index: int) -> MigProfile | None:
        for p in self.profiles:
            if p.nvml_index == nvml_index:
                return p
        return None

    def by_id(self, profile_id: int) -> MigProfile | None:
        for p in self.profiles:
            if p.profile_id == profile_id:
                return p
        return None


def _seven_slice(key, models, gb, slice_mib):
    """A100 / H100 / H200 / B200: 7 compute and 8 memory slices.

    ``gb``: the memory of 1g, 1g (double memory) ... 7g in the profile
    names, e.g. (10, 20, 20, 40, 40, 80) for the 80 GB boards.
    """
    g1, g1x2, g2, g3, g4, g7 = gb
    rows = (
        ('1g.%dgb' % g1, P1, 19, 1, 1, 7, tuple(range(7))),
        ('1g.%dgb+me' % g1, P1_ME, 20, 1, 1, 1, tuple(range(7))),
        ('1g.%dgb' % g1x2, P1_2X, 15, 1, 2, 4, (0, 2, 4, 6)),
        ('2g.%dgb' % g2, P2, 14, 2, 2, 3, (0, 2, 4)),
        ('3g.%dgb' % g3, P3, 9, 3, 4, 2, (0, 4)),
        ('4g.%dgb' % g4, P4, 5, 4, 4, 1, (0,)),
        ('7g.%dgb' % g7, P7, 0, 7, 8, 1, (0,)),
    )
    return MigBoard(key, models, 7, 8, tuple(
        MigProfile(name, index, pid, cs, ms, count, starts, ms * slice_mib)
        for name, index, pid, cs, ms, count, starts in rows))


A30 = MigBoard('A30', ('A30', 'A30_24GB'), 4, 4, (
    MigProfile('1g.6gb', P1, 14, 1, 1, 4, (0, 1, 2, 3), 5888),
    MigProfile('1g.6gb+me', P1_ME, 21, 1, 1, 1, (0, 1, 2, 3), 5888),
    MigProfile('2g.12gb', P2, 5, 2, 2, 2, (0, 2), 11776),
    MigProfile('2g.12gb+me', P2_ME, 6, 2, 2, 1, (0, 2), 11776),
    MigProfile('4g.24gb', P4, 0, 4, 4, 1, (0,), 23552),
))

BOARDS: tuple[MigBoard, ...] = (
    _seven_slice('A100_40GB', ('A100_SXM4_40GB', 'A100_PCIE_40GB'),
                 (5, 10, 10, 20, 20, 40), 4864),
    _seven_slice('A100_80GB', ('A100_80GB_PCIE', 'A100_SXM4_80GB'),
                 (10, 20, 20, 40, 40, 80), 9728),
    A30,
    _seven_slice('H100_80GB', ('H100_80GB_HBM3', 'H100_PCIE'),
                 (10, 20, 20, 40, 40, 80), 9984),
    _seven_slice('H200', ('H200',), (18, 35, 35, 71, 71, 141), 17920),
    _seven_slice('B200', ('B200',), (23, 45, 45, 90, 90, 180), 22784),
)


def board_for_model(model: str | None) -> MigBoard | None:
    """The MIG geometry of a normalized model, or None.

    None: not MIG-capable, or a board this table lacks.
    """
    if not model:
        return None
    for board in BOARDS:
        if model in board.models:
            return board
    return None


def board(key: str) -> MigBoard:
    for b in BOARDS:
        if b.key == key:
            return b
    raise KeyError(key)
