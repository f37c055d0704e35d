"""`make images`: build the service and runner images on this machine and start each once.

No registry is needed: the base of both targets is a Debian bookworm root filesystem made by
`debootstrap --variant=minbase` (cached, reused), imported into buildah as a local image. Each
target is built with `buildah bud --isolation chroot` on vfs storage (no daemon, no cgroups),
then started: the service's own command must answer `GET /healthz` with 200 and keep its
SQLite file on the image's volume, not in the container's layer; the runner's entry point must
answer `--help` and its Python must import `runner.cli` and print the job environment probe.
Needs root, buildah and debootstrap (`apt-get install buildah debootstrap`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = "bookworm"
BASE = f"localhost/ondemand-base:{SUITE}"
TAGS = {"service": "localhost/ondemand-service:dev", "runner": "localhost/ondemand-runner:dev"}
ROOTFS_LABEL = "org.ondemand.rootfs"
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HEALTHZ_WAIT_S = 90.0
# runner.cli and its job environment probe; then one comparison, whose interval needs scipy,
# which nothing imports until a benchmark is judged.
PROBE = """\
import os, sys
import runner.cli
from runner.environment.probe import environment_info
from runner.job.kinds.benchmark.stats import process_change
before = [1.0, 1.02, 0.99, 1.01, 1.0, 0.98]
print(process_change(before, [b * 1.1 for b in before]).model_dump_json())  # scipy's t-interval
info = environment_info(sys.executable, os.environ, vendor="cpu", runner_name=None,
                        runner_version=None)
print(info.model_dump_json())
"""


class Failed(RuntimeError):
    """A step failed; the message says which and why."""


@dataclass
class Built:
    target: str
    tag: str
    size: str = "?"
    build_s: float | None = None
    check: str = "not run"
    ok: bool = False


@dataclass(frozen=True)
class Buildah:
    """The buildah command line on this script's own storage: vfs under the cache directory,
    so nothing clashes with another store (say podman's overlay one) on the same machine."""

    root: Path
    runroot: Path

    def argv(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(self.root),
            "--runroot",
            str(self.runroot),
            "--storage-driver",
            "vfs",
            *args,
        ]

    def out(self, *args: str) -> str:
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise Failed(f"buildah {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout.strip()

    def image(self, name: str) -> dict | None:
        """The image's inspect record, or None when the store does not hold it."""
        done = subprocess.run(
            self.argv("inspect", "--type", "image", name),
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(done.stdout) if done.returncode == 0 else None

    def remove_container(self, name: str) -> None:
        subprocess.run(self.argv("rm", name), capture_output=True, check=False)


def tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def base_rootfs(cache: Path, mirror: str, log_dir: Path) -> tuple[Path, str, float | None]:
    """The debootstrap root filesystem, its stamp, and the seconds it took (None: reused).

    Made aside and renamed into place, so an interrupted run leaves no half rootfs behind."""
    rootfs = cache / f"{SUITE}-minbase"
    done = cache / f"{SUITE}-minbase.done"
    if rootfs.is_dir() and done.is_file():
        return rootfs, done.read_text().strip(), None
    partial = cache / f"{SUITE}-minbase.partial"
    for stale in (partial, rootfs):
        if stale.exists():
            shutil.rmtree(stale)
    log = log_dir / "debootstrap.log"
    print(f"debootstrap --variant=minbase {SUITE} → {rootfs} (log: {log})", flush=True)
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(
            ["debootstrap", "--variant=minbase", SUITE, str(partial), mirror],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if code != 0:
        raise Failed(f"debootstrap exited {code}:\n{tail(log)}")
    for deb in (partial / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()  # debootstrap's downloads: no part of a base image
    partial.rename(rootfs)
    stamp = f"{SUITE}-{int(time.time())}"
    done.write_text(stamp + "\n")
    return rootfs, stamp, time.monotonic() - start


def local_cas() -> list[Path]:
    """The certificate authorities this host adds to Debian's (a TLS-inspecting proxy's)."""
    return sorted(LOCAL_CAS.rglob("*.crt")) if LOCAL_CAS.is_dir() else []


def import_base(buildah: Buildah, rootfs: Path, stamp: str) -> bool:
    """Make BASE from the rootfs unless the store holds it from this very rootfs and these
    local CAs; True when it was imported.

    The base trusts what this host trusts, as a company's base image carries its CA: its local
    CAs go where `ca-certificates` (installed by both targets) adds them to the system bundle,
    and pip is pointed at that bundle instead of its own, which knows no proxy."""
    cas = local_cas()
    digest = hashlib.sha256(b"".join(ca.read_bytes() for ca in cas)).hexdigest()[:12]
    stamp = f"{stamp}-cas-{digest}" if cas else stamp
    found = buildah.image(BASE)
    labels = (found or {}).get("OCIv1", {}).get("config", {}).get("Labels") or {}
    if labels.get(ROOTFS_LABEL) == stamp:
        return False
    name = "ondemand-images-base"
    buildah.remove_container(name)
    buildah.out("from", "--name", name, "scratch")
    try:
        mount = buildah.out("mount", name)
        subprocess.run(["cp", "-a", f"{rootfs}/.", mount], check=True)
        if cas:
            for ca in cas:
                target = Path(mount) / ca.relative_to("/").parent
                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ca, target / ca.name)
            conf = Path(mount) / "etc/pip.conf"
            conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        buildah.out("umount", name)
        buildah.out(
            "config",
            "--env",
            f"PATH={PATH}",
            "--cmd",
            "/bin/bash",
            "--label",
            f"{ROOTFS_LABEL}={stamp}",
            name,
        )
        buildah.out("commit", "--quiet", "--rm", name, BASE)
    finally:
        buildah.remove_container(name)
    return True


def build_inputs(base_id: str) -> str:
    """A digest of what a build reads: the base image, the Dockerfile, .dockerignore and what
    the Dockerfile copies (its COPY lines' sources, bytecode left out)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    sources = {
        token
        for line in re.findall(r"^COPY (.+)$", dockerfile, re.M)
        for token in line.split()[:-1]
        if not token.startswith("--")
    }
    digest = hashlib.sha256(base_id.encode())
    for name in ["Dockerfile", ".dockerignore", *sorted(sources)]:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(f"{file.relative_to(ROOT)}\0".encode() + file.read_bytes())
    return digest.hexdigest()[:16]


def build(buildah: Buildah, image: Built, log_dir: Path, inputs: str, force: bool) -> None:
    """`buildah bud` of one target on BASE, unless the image was built from these very inputs.

    Intermediate layers are kept for the next change; on vfs even an all-cached build copies
    the root filesystem at every step (minutes), hence the record of each image's inputs
    (`built.json`; a bud --label would not do: a cached last step keeps the old labels). The
    image it replaces is removed when nothing uses it."""
    record = log_dir.parent / "built.json"
    built = json.loads(record.read_text()) if record.is_file() else {}
    before = (buildah.image(image.tag) or {}).get("FromImageID")
    if not force and before and built.get(image.tag) == {"inputs": inputs, "image": before}:
        print(f"{image.tag}: up to date (inputs {inputs})", flush=True)
        image.size = size(buildah, image.tag)
        return
    log = log_dir / f"build-{image.target}.log"
    print(f"building {image.target} → {image.tag} (log: {log})", flush=True)
    argv = buildah.argv(
        "bud",
        "--isolation",
        "chroot",
        "--layers",
        "--format",
        "docker",  # OCI has no HEALTHCHECK
        "--pull=never",
        "--force-rm",
        "--build-arg",
        f"PYTHON_IMAGE={BASE}",
        "--build-arg",
        f"RUNNER_BASE={BASE}",
        "--target",
        image.target,
        "--tag",
        image.tag,
        "--file",
        str(ROOT / "Dockerfile"),
        str(ROOT),
    )
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    image.build_s = time.monotonic() - start
    if code != 0:
        raise Failed(f"building {image.target} failed (exit {code}):\n{tail(log)}")
    after = (buildah.image(image.tag) or {}).get("FromImageID")
    if before and before != after:
        subprocess.run(buildah.argv("rmi", before), capture_output=True, check=False)
    built[image.tag] = {"inputs": inputs, "image": after}
    record.write_text(json.dumps(built, indent=1) + "\n")
    image.size = size(buildah, image.tag)
    print(f"  built in {image.build_s:.0f} s, {image.size}", flush=True)


def size(buildah: Buildah, tag: str) -> str:
    listed = json.loads(buildah.out("images", "--json", tag))
    return str(listed[0].get("size", "?")) if listed else "?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(config: dict, port: int) -> list[str]:
    """The image's own command, listening on loopback at `port`."""
    command = list(config.get("Entrypoint") or []) + list(config.get("Cmd") or [])
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag not in command:
            raise Failed(f"the service's command has no {flag}: {command}")
        command[command.index(flag) + 1] = value
    return command


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group this script started, then SIGKILL after 20 s."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def check_service(buildah: Buildah, image: Built, log_dir: Path) -> None:
    config = (buildah.image(image.tag) or {}).get("Docker", {}).get("config", {})
    port = free_port()
    command = serve_command(config, port)
    name = "ondemand-images-service"
    log = log_dir / "start-service.log"
    buildah.remove_container(name)
    buildah.out("from", "--pull=never", "--name", name, image.tag)
    try:
        with log.open("w") as out:
            process = subprocess.Popen(
                buildah.argv(
                    "run",
                    "--isolation",
                    "chroot",
                    "--env",
                    "ONDEMAND_LOCAL_TRIAL=1",
                    name,
                    "--",
                    *command,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            image.check = wait_for_healthz(port, process, log)
        finally:
            stop(process)
        database = sqlite_path(config)
        buildah.out("run", "--isolation", "chroot", name, "--", "test", "-s", database)
        layer = Path(buildah.out("mount", name))
        in_layer = (layer / database.lstrip("/")).exists()
        buildah.out("umount", name)
        if in_layer:
            raise Failed(f"{database} was written into the container's layer, not a volume")
        image.check += f"; {database} on the volume"
        image.ok = True
    finally:
        buildah.remove_container(name)


def sqlite_path(config: dict) -> str:
    """The SQLite file the image's ONDEMAND_DATABASE_URL names."""
    env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
    url = env.get("ONDEMAND_DATABASE_URL", "")
    if not url.startswith("sqlite:////"):
        raise Failed(f"the image's ONDEMAND_DATABASE_URL is no absolute SQLite path: {url!r}")
    return url.removeprefix("sqlite:///")


def wait_for_healthz(port: int, process: subprocess.Popen[bytes], log: Path) -> str:
    url = f"http://127.0.0.1:{port}/healthz"
    start = time.monotonic()
    while time.monotonic() - start < HEALTHZ_WAIT_S:
        if process.poll() is not None:
            raise Failed(f"the service exited {process.returncode}:\n{tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return f"GET /healthz 200 after {time.monotonic() - start:.1f} s"
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise Failed(f"no 200 from {url} within {HEALTHZ_WAIT_S:.0f} s:\n{tail(log)}")


def check_runner(buildah: Buildah, image: Built) -> None:
    config = (buildah.image(image.tag) or {}).get("Docker", {}).get("config", {})
    entrypoint = list(config.get("Entrypoint") or [])
    name = "ondemand-images-runner"
    buildah.remove_container(name)
    buildah.out("from", "--pull=never", "--name", name, image.tag)
    try:
        run = ["run", "--isolation", "chroot", name, "--"]
        buildah.out(*run, *entrypoint, "--help")
        compared, probed = buildah.out(*run, "python", "-c", PROBE).splitlines()[-2:]
    finally:
        buildah.remove_container(name)
    print(f"runner probe: {probed}\nrunner comparison: {compared}", flush=True)
    info, ratio = json.loads(probed), json.loads(compared)
    if not info.get("python") or ratio.get("low") is None:
        raise Failed(f"the probe read no Python version, or the comparison no interval: {info}")
    image.check = f"entry point --help ok; probe: python {info['python']}; scipy interval ok"
    image.ok = True


def summary(images: list[Built]) -> str:
    rows = [("image", "size", "build s", "start check")]
    for image in images:
        seconds = f"{image.build_s:.0f}" if image.build_s is not None else "cached"
        rows.append((image.tag, image.size, seconds, image.check))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make images", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("ONDEMAND_IMAGES_CACHE", "/var/cache/ondemand-images")),
        help="the debootstrap rootfs, the build logs and buildah's storage",
    )
    parser.add_argument("--mirror", default="http://deb.debian.org/debian")
    parser.add_argument(
        "--fresh-base", action="store_true", help="debootstrap again, though a rootfs is cached"
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="build even where the image's inputs are unchanged"
    )
    args = parser.parse_args(argv)
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if missing:
        print(f"make images: needs {', '.join(missing)}: apt-get install {' '.join(missing)}")
        return 2
    if os.geteuid() != 0:
        print("make images: debootstrap and buildah's chroot isolation need root")
        return 2
    cache: Path = args.cache
    log_dir = cache / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.fresh_base:
        (cache / f"{SUITE}-minbase.done").unlink(missing_ok=True)
    buildah = Buildah(root=cache / "storage", runroot=Path("/run/ondemand-images"))
    base = Built("base", BASE, check="debootstrap --variant=minbase (no start)", ok=True)
    images = [Built(target, tag) for target, tag in TAGS.items()]
    start = time.monotonic()
    try:
        rootfs, stamp, made_s = base_rootfs(cache, args.mirror, log_dir)
        print(
            f"base rootfs {rootfs}: "
            + (f"debootstrap {made_s:.0f} s" if made_s is not None else "cached"),
            flush=True,
        )
        began = time.monotonic()
        if import_base(buildah, rootfs, stamp):
            base.build_s = (made_s or 0.0) + time.monotonic() - began
        print(f"base image {BASE}: " + ("imported" if base.build_s else "up to date"), flush=True)
        base.size = size(buildah, BASE)
        inputs = build_inputs(str((buildah.image(BASE) or {}).get("FromImageID")))
        for image in images:
            build(buildah, image, log_dir, inputs, args.rebuild)
        for image in images:
            print(f"starting {image.target}", flush=True)
            try:
                if image.target == "service":
                    check_service(buildah, image, log_dir)
                else:
                    check_runner(buildah, image)
            except Failed as exc:
                image.check = "FAILED"
                print(f"  {exc}", file=sys.stderr, flush=True)
    except Failed as exc:
        print(f"make images: {exc}", file=sys.stderr)
        print(summary([base, *images]))
        return 1
    print()
    print(summary([base, *images]))
    print(f"total {time.monotonic() - start:.0f} s; the images are in {buildah.root} (vfs):")
    print("  " + " ".join(buildah.argv("images")))
    return 0 if all(image.ok for image in images) else 1


if __name__ == "__main__":
    sys.exit(main())
