# SPDX-License-Identifier: Apache-2.0

"""NVIDIA's MIG GPU-instance profiles per board, as documented.

Every column of every board was checked on 2026-12-02 against the
sources below; what no readable source gives is marked unconfirmed and
is what ``tools/device-check`` (which prints ``-lgip`` / ``-lgipp`` as
the real driver reports them) settles on a lent GPU.

Sources:

[G] NVIDIA Multi-Instance GPU User Guide (v580), "Supported MIG
    Profiles" (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
    supported-mig-profiles.html): tables "GPU Instance Profiles on" A30,
    A100 (40GB, with the note giving the 80GB names), H100 (80GB), H200
    (141GB) and B200 (180GB): profile names, fraction of memory (memory
    slices) and of SMs (compute slices), number of instances.
[GS] The same guide, "Getting Started with MIG": the A100-SXM4-40GB
    ``nvidia-smi mig -lgip`` example (IDs, GiB) and ``-lgipp`` example
    (IDs 19/20/15/14/9/5/0 and their placements in memory slices).
[MP] NVIDIA/mig-parted (snapshot bd7160f, 2026-08-21),
    deployments/systemd/config-default.yaml and
    deployments/container/nvidia-mig-manager-example-hopper-blackwell.yaml:
    the profile names and counts per board (``all-1g.18gb`` 7,
    ``all-1g.23gb`` 7, ``all-1g.45gb`` 4, ``all-7g.180gb`` 1, ...), and
    pkg/mig/config/config_test.go: an A100's ``1g.10gb`` is NVML's
    ``GPU_INSTANCE_PROFILE_1_SLICE_REV2``.
[C] ``nvidia-smi mig -lgip`` / ``-lgipp`` captured from real boards in
    public repositories (third-party, not NVIDIA; read with the code
    search): A30 on driver 535.183.01 (IDs 14/21/5/6/0, placements
    {0,1,2,3}:1 {0,2}:2 {0}:4, 5.81/11.69/23.44 GiB, MIG devices of
    5952 and 11968 MiB); A100-SXM4-80GB (MLSysOps/MIGProfiler README:
    IDs 19/20/14/9/5/0, 9.50/19.50/39.50/79.25 GiB, a driver without
    1g.20gb); H100 80GB HBM3 from four independent captures (IDs
    19/20/15/14/9/5/0, the ``-lgipp`` placements of [GS], 9.75/19.62/
    39.50/79.25 GiB; one older driver prints 9.62/19.50/39.25).

Per board, which source confirmed which column:

========== ======= ======== ======= ======= ============ ==============
board      names   counts   slices  IDs     placements   memory_mib
========== ======= ======== ======= ======= ============ ==============
A30        G, MP   G, MP    G       C       C            C (note 1)
A100 40GB  G, MP   G, MP    G       GS      GS           GS (note 1)
A100 80GB  G, MP   G, MP    G       C (n2)  unconf. (n3) C (note 2)
H100 80GB  G, MP   G, MP    G       C       C            C (note 1)
H200       G, MP   G, MP    G       unconf. unconf.      unconfirmed
B200       G, MP   G, MP    G       unconf. unconf.      unconfirmed
========== ======= ======== ======= ======= ============ ==============

1. ``-lgip`` prints GiB with two decimals, so a MiB value here is that
   figure x 1024 (exact for x.25/x.50/x.75; 9.62 / 19.62 are taken as
   9856 / 20096 MiB, 23.44 as 24000, within the column's 5 MiB); the
   size differs between driver releases (the H100 captures show two), so
   the fake's ``memorySizeMB`` is one driver's answer, not a constant.
2. The A100 80GB capture lacks ``1g.20gb`` (ID 15); its ID, placements
   {0,2,4,6}:2 and memory (taken as 2g.20gb's) are unconfirmed.
3. The guide gives the 80GB board the 40GB table's geometry under new
   names; no source shows its placements, so they are the 40GB's.
4. The A100 80GB capture is of an SXM4 board and the H100 captures of
   SXM5 (HBM3) boards; the PCIe models share their rows unconfirmed.

NVML indexes (``nvml_index``): the constants are the NVML API
reference's (``NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1`` 0x7,
``_2_SLICE_REV1`` 0x8, ``_1_SLICE_REV2`` 0x9; a unit test compares them
with pynvml's); [MP] confirms that the 1g double-memory profile is
``_1_SLICE_REV2``; that ``+me`` is ``_1_SLICE_REV1`` / ``_2_SLICE_REV1``
no source read says in words (unconfirmed; the driver's names tell).

Unconfirmed (no readable source; device-check on real hardware will
tell): the H200 and B200 profile IDs (written as the H100's: 19, 20, 15,
14, 9, 5, 0), their placements (written as the H100's) and their
``memory_mib`` (memory slices x 1/8 of 140 / 178 GiB).  The go-nvml mock
tables (go-nvml/pkg/nvml/mock/gpus, vendored in mig-parted) are not used
as a source: they use NVML's profile indexes as IDs, round memory to
whole GB and size placements in compute slices, unlike the driver.
Not modelled: the H100 94/96 GB, H200 NVL, GH200, GB200 and RTX PRO
Blackwell boards (other names; mig-parted and the guide list them).

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


def _seven_slice(key, models, gb, mib):
    """A100 / H100 / H200 / B200: 7 compute and 8 memory slices.

    ``gb``: the memory of 1g, 1g (double memory) ... 7g in the profile
    names, e.g. (10, 20, 20, 40, 40, 80) for the 80 GB boards.  ``mib``:
    the memory ``-lgip`` reports for a 1-, 2-, 4- and 8-memory-slice
    profile (see the module's sources).
    """
    g1, g1x2, g2, g3, g4, g7 = gb
    size = dict(zip((1, 2, 4, 8), mib))
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
        MigProfile(name, index, pid, cs, ms, count, starts, size[ms])
        for name, index, pid, cs, ms, count, starts in rows))


A30 = MigBoard('A30', ('A30', 'A30_24GB'), 4, 4, (
    MigProfile('1g.6gb', P1, 14, 1, 1, 4, (0, 1, 2, 3), 5952),
    MigProfile('1g.6gb+me', P1_ME, 21, 1, 1, 1, (0, 1, 2, 3), 5952),
    MigProfile('2g.12gb', P2, 5, 2, 2, 2, (0, 2), 11968),
    MigProfile('2g.12gb+me', P2_ME, 6, 2, 2, 1, (0, 2), 11968),
    MigProfile('4g.24gb', P4, 0, 4, 4, 1, (0,), 24000),
))

BOARDS: tuple[MigBoard, ...] = (
    _seven_slice('A100_40GB', ('A100_SXM4_40GB', 'A100_PCIE_40GB'),
                 (5, 10, 10, 20, 20, 40), (4864, 9856, 19968, 40192)),
    _seven_slice('A100_80GB', ('A100_80GB_PCIE', 'A100_SXM4_80GB'),
                 (10, 20, 20, 40, 40, 80), (9728, 19968, 40448, 81152)),
    A30,
    _seven_slice('H100_80GB', ('H100_80GB_HBM3', 'H100_PCIE'),
                 (10, 20, 20, 40, 40, 80), (9984, 20096, 40448, 81152)),
    # H200 and B200 memory: unconfirmed (module docstring)
    _seven_slice('H200', ('H200',), (18, 35, 35, 71, 71, 141),
                 (17920, 35840, 71680, 143360)),
    _seven_slice('B200', ('B200',), (23, 45, 45, 90, 90, 180),
                 (22784, 45568, 91136, 182272)),
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
