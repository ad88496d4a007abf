# SPDX-License-Identifier: Apache-2.0

"""Files the commands write for the operator: one atomic write.

``gpu-nova-ext nova-conf --output`` and ``deploy-config`` (configuration
files a deploy tool or a service reads) and ``openstack gpu rollout run
--state-file`` (the state ``--resume`` continues from) each write a file
that another reader may open at any moment, and that must survive a
crash of the host right after the command said it was written.
"""
import os
import tempfile

from gpu_nova_ext import exception


def write_atomic(path: str, text: str, *, option: str = '--output',
                 mode: int = 0o644) -> None:
    """Write ``text`` to ``path``: a reader sees the old file or the new.

    The text goes to a temporary file beside ``path``, is flushed to disk
    (``fsync``), given ``mode`` and renamed over ``path``; on failure the
    temporary file is removed and the error names ``path`` and the
    ``option`` that chose it.
    """
    if os.path.isdir(path):
        raise exception.GpuNovaExtException(
            'Cannot write %s: it is a directory. Name a file with %s.'
            % (path, option))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(
            dir=os.path.dirname(os.path.abspath(path)),
            prefix='.%s.' % os.path.basename(path), suffix='.tmp')
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise exception.GpuNovaExtException(
                'Cannot write %s: %s. Choose a writable %s path.'
                % (path, exc.strerror or exc, option))
        raise
