"""Build delayline's JVM hold (``jvm/``) with Maven, once per source version.

The jar is compiled against the Spark jars inside the installed pyspark package, so it
always matches the Spark it runs in, and cached beside the resolved jars under a key
that hashes the Java sources, the pom and the pyspark version: editing a source
rebuilds it, an unchanged tree reuses it. No binary is committed.
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

from delayline.errors import InfraError
from delayline.infra.jars import default_cache_dir, infra_files

log = logging.getLogger(__name__)

JAR_NAME = "delayline-hold.jar"


def jvm_sources() -> Path:
    """The ``jvm`` project (pom and Java sources): packaged copy first, then the tree."""
    packaged = Path(str(resources.files("delayline.infra") / "resources" / "jvm"))
    if (packaged / "pom.xml").is_file():
        return packaged
    tree = Path(__file__).resolve().parents[3] / "jvm"
    if (tree / "pom.xml").is_file():
        return tree
    raise InfraError("cannot find the jvm/ sources of the hold; reinstall delayline")


def pyspark_jars() -> tuple[Path, str]:
    """The jars directory of the installed pyspark, and its version."""
    import pyspark  # noqa: PLC0415 - only a build needs it

    return Path(pyspark.__file__).parent / "jars", pyspark.__version__


def hold_jar(cache_dir: Path | None = None, *, quiet: bool = False) -> Path:
    """The built hold jar, building it first when the cache lacks this version.

    Raises:
        InfraError: Maven is missing or the build failed; its output is in the message.
    """
    project = jvm_sources()
    jars, version = pyspark_jars()
    files = [project / "pom.xml", *sorted((project / "src").rglob("*.java"))]
    digest = hashlib.sha256(version.encode())
    for path in files:
        digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    target = (cache_dir or default_cache_dir()) / f"hold-{digest.hexdigest()[:12]}" / JAR_NAME
    if not target.is_file():
        _build(project, jars, version, target, quiet)
    return target


def _build(project: Path, jars: Path, version: str, target: Path, quiet: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InfraError("Maven (mvn) is not on PATH; install it (Debian: apt-get install maven)")
    if not quiet:
        print(f"delayline: building the JVM hold with Maven into {target} (once)", file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    _, settings = infra_files()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        # A copy: an installed package's directory may be read-only, and two builds
        # must never share a target/ directory.
        work = Path(tmp) / "jvm"
        shutil.copytree(project, work, ignore=shutil.ignore_patterns("target"))
        cmd = [
            mvn, "-B", "-q", "-s", str(settings), "-f", str(work / "pom.xml"),
            f"-Dpyspark.jars={jars}", f"-Dspark.version={version}",
            f"-Dscala.library.version={_jar_version(jars, 'scala-library')}",
            f"-Dhadoop.version={_jar_version(jars, 'hadoop-client-api')}",
            f"-Djackson.version={_jar_version(jars, 'jackson-annotations')}", "package",
        ]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        built = sorted((work / "target").glob("delayline-hold-*.jar"))
        if result.returncode != 0 or not built:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
            raise InfraError(f"Maven could not build the JVM hold:\n{tail}")
        staged = Path(tmp) / JAR_NAME
        shutil.copyfile(built[0], staged)
        os.replace(staged, target)  # atomic: a half-written jar is never used
    log.info("built the JVM hold into %s", target)


def _jar_version(jars: Path, artifact: str) -> str:
    """The version of ``artifact`` among pyspark's jars (``scala-library-2.13.18.jar``)."""
    found = sorted(jars.glob(f"{artifact}-[0-9]*.jar"))
    if not found:
        raise InfraError(f"no {artifact} jar in {jars}; is pyspark installed completely?")
    return found[0].name.removeprefix(f"{artifact}-").removesuffix(".jar")
