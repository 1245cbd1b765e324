"""Which engine binaries a model's figures depend on, and their identities: llama-fit-params
beside a llama-server (or named on its row), each binary's path, size and modification time,
and the stamp of everything outside the library the engines' figures depend on (part of the
load memo's key). Light on purpose: every run, a no-op one too, computes `engine_state`."""

from __future__ import annotations

import os
import shutil

from autogen.engines import engine_of, engine_row
from autogen.settings.schema import Settings

#: A backend row's `fit_params: none`: never ask.
OFF = "none"
#: The folder of `cache_dir` where `swapgen calibrate` keeps its measurements.
CALIBRATION_DIR = "calibration"


def which(exe: str) -> str | None:
    """The binary a command names, found as a shell would."""
    return shutil.which(exe) or (exe if exe else None)


def estimator_for(name: str, server_exe: str | None, row_setting: str = "") -> str | None:
    """The build's estimator (`EngineRow.estimator`, llama-fit-params): the row's `fit_params`
    path, else the one beside its server; None when it has none (or `fit_params: none`), or its
    engine has no estimator (`name` "")."""
    if not name or row_setting.strip().lower() == OFF:
        return None
    candidate = os.path.expanduser(row_setting.strip()) if row_setting.strip() else None
    if candidate is None and server_exe and os.sep in server_exe:
        candidate = os.path.join(os.path.dirname(server_exe), name)
    return candidate if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def identity(path: str | None) -> str:
    """A binary's identity in cache keys: path, size and modification time ("" when absent)."""
    if not path:
        return ""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def calibration_state(cache_dir: str) -> str:
    """The measurements folder's own stamp: a file added or replaced changes it."""
    try:
        st = os.stat(os.path.join(cache_dir, CALIBRATION_DIR))
    except OSError:
        return ""
    return f"{st.st_mtime_ns}:{st.st_nlink}"


def engine_state(settings: Settings) -> str:
    """The measurements folder, and the binary and estimator of each row of an engine whose
    figures sizing follows (`EngineRow.measured`): a new measurement or a rebuilt engine re-plans
    the models it concerns."""
    parts = [calibration_state(settings.cache_dir)]
    for row in settings.backends:
        engine = engine_row(engine_of(row.kind))
        if engine.measured:
            exe = which(row.path.strip())
            parts += [identity(exe), identity(estimator_for(engine.estimator, exe, row.fit_params))]
    return "|".join(parts)
