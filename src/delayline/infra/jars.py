"""The local jar cache: Maven resolves JVM dependencies once, later runs reuse them.

Two sets, kept apart because their class paths must never mix:
``broker`` (Apache Kafka, for the local broker) and ``spark`` (the Spark Kafka
connector, handed to Spark through ``spark.jars``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal

from delayline.errors import InfraError

log = logging.getLogger(__name__)

Profile = Literal["broker", "spark"]
PROFILES: tuple[Profile, ...] = ("broker", "spark")
CACHE_ENV = "DELAYLINE_JAR_CACHE"
_COMPLETE = ".complete"


def default_cache_dir() -> Path:
    """``$DELAYLINE_JAR_CACHE``, else ``$XDG_CACHE_HOME/delayline/jars``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "delayline" / "jars"


def infra_files() -> tuple[Path, Path]:
    """Paths of the pom and the Maven settings: packaged copy first, then the source tree."""
    packaged = resources.files("delayline.infra") / "resources"
    pom = Path(str(packaged / "pom.xml"))
    if pom.is_file():
        return pom, Path(str(packaged / "maven-settings.xml"))
    tree = Path(__file__).resolve().parents[3] / "infra"
    if (tree / "pom.xml").is_file():
        return tree / "pom.xml", tree / "maven-settings.xml"
    raise InfraError("cannot find infra/pom.xml; reinstall delayline")


def resolve_jars(
    profile: Profile, cache_dir: Path | None = None, *, quiet: bool = False
) -> list[Path]:
    """Return the jars of ``profile``, running Maven only when the cache lacks them.

    The cache key is a hash of the pom and settings, so editing versions
    resolves afresh while unchanged ones are reused. A half-finished resolution
    is never used: jars land in a temporary directory renamed into place.

    Raises:
        InfraError: Maven is missing or failed; its output is in the message.
    """
    if profile not in PROFILES:
        raise InfraError(f"unknown jar profile {profile!r}; expected one of {PROFILES}")
    pom, settings = infra_files()
    digest = hashlib.sha256(pom.read_bytes() + settings.read_bytes()).hexdigest()[:12]
    root = cache_dir or default_cache_dir()
    target = root / f"{profile}-{digest}"
    if not (target / _COMPLETE).exists():
        _run_maven(profile, pom, settings, root, target, quiet)
    jars = sorted(target.glob("*.jar"))
    if not jars:
        raise InfraError(f"jar cache {target} is empty; delete it and try again")
    return jars


def _run_maven(
    profile: Profile, pom: Path, settings: Path, root: Path, target: Path, quiet: bool
) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InfraError("Maven (mvn) is not on PATH; install it (Debian: apt-get install maven)")
    root.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(
            f"delayline: resolving {profile} jars with Maven into {target} (once)", file=sys.stderr
        )
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{profile}-") as tmp:
        cmd = [
            mvn,
            "-B",
            "-q",
            "-s",
            str(settings),
            "-f",
            str(pom),
            "-P",
            profile,
            "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp}",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise InfraError(f"Maven could not resolve the {profile} jars:\n{tail}")
        (Path(tmp) / _COMPLETE).write_text(f"resolved from {pom}\n")
        if target.exists():  # a concurrent run finished first; keep its copy
            return
        os.rename(tmp, target)
        # TemporaryDirectory cleanup would fail on the moved path; recreate it empty.
        Path(tmp).mkdir()
    log.info("resolved %s jars into %s", profile, target)


def classpath(jars: list[Path]) -> str:
    """A Java class path of ``jars``."""
    return os.pathsep.join(str(j) for j in jars)
