#!/usr/bin/python
"""Ansible module kmirror_wheelhouse: build, on the controller, the wheels the worker hosts install."""

# ruff: noqa: E402 (Ansible plugin layout: the DOCUMENTATION strings come before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
module: kmirror_wheelhouse
short_description: Build the wheelhouse of kmirror and its dependencies for air-gapped hosts
description:
  - Runs on the controller (C(delegate_to: localhost)) with the Python that has pip.
  - Builds the kmirror wheel from the worker source as pure Python, reproducibly (C(SOURCE_DATE_EPOCH)),
    in a copy of the source so the tree stays clean.
  - Downloads every other wheel from I(lock), a hashed lock of the hosts (C(locks/hosts.txt), written by
    C(make lock)): C(pip download --require-hashes --no-deps --only-binary=:all:) for the hosts' Python
    version and platforms, so pip refuses any file whose SHA-256 the lock does not list. Fails when the lock
    lacks a dependency of kmirror (or of the I(extras) it installs).
  - I(source_builds) are built on the controller from their source distribution, downloaded with its hash
    from I(source_lock) (or I(lock)); their wheels replace the lock's entry.
  - Updates I(dest) only where a file differs, removes wheels no longer needed and writes C(SHA256SUMS): a
    downloaded wheel's line is the lock's hash that pip matched it with (the module checks it is one of the
    lock's), kmirror's own wheel and the source builds' are the digests of what was built here.
    Reports C(changed) when I(dest) changed.
  - Remembers a digest of the source, the locks and the options (C(.source-sha256)); when none changed, the
    wheelhouse is reused as it is, with nothing built or downloaded.
options:
  source:
    description: The worker's source directory (holds pyproject.toml).
    type: path
    required: true
  dest:
    description: The wheelhouse directory on the controller.
    type: path
    required: true
  lock:
    description: The hosts' hashed lock (C(name==version --hash=sha256:...) lines, every package the hosts
      install and pip), e.g. C(locks/hosts.txt).
    type: path
    required: true
  extras:
    description: kmirror's extras the hosts install (e.g. C(audit)); the lock must hold their packages.
    type: list
    elements: str
    default: []
  python_version:
    description: The hosts' Python version (C(major.minor)).
    type: str
    default: "3.11"
  platforms:
    description: The hosts' wheel platform tags, most specific first.
    type: list
    elements: str
    default: [manylinux_2_28_x86_64, manylinux2014_x86_64]
  pip_args:
    description: Extra arguments for C(pip download) (an index URL, C(--no-index --find-links DIR) for an
      offline controller).
    type: list
    elements: str
    default: []
  source_builds:
    description:
      - Requirements (C(name) or C(name==version)) whose wheels are built from their source distribution on
        the controller instead of taken from the index, with I(build_python) and the controller's system
        libraries (e.g. C(confluent-kafka==2.0.2) against Debian's librdkafka-dev, for GSSAPI; C(pyspark),
        which PyPI has only as source).
      - The source distribution is downloaded with the hashes of I(source_lock) or I(lock) (the version
        they pin when none is given); the built wheel replaces the lock's entry of that name. Built wheels
        are cached in I(build_cache).
    type: list
    elements: str
    default: []
  source_lock:
    description: A hashed lock with the versions of I(source_builds) that I(lock) does not pin (e.g.
      C(locks/hosts-gssapi.txt)).
    type: path
  build_python:
    description: The Python that builds I(source_builds) (the hosts' version, with its headers), e.g.
      C(/usr/bin/python3.11).
    type: path
  build_cache:
    description: Where wheels built from source are kept between runs (default C(DEST/../source-builds)).
    type: path
  local_version:
    description:
      - A PEP 440 local version label (letters, digits, dots) appended to kmirror's version in the built
        wheel (C(0.1.0) becomes C(0.1.0+LABEL)), e.g. a site's own build of a patched tree, or a second
        version of the same source to prove an upgrade and a rollback. The source tree is not changed:
        C(__version__) is rewritten in the build's copy.
    type: str
    default: ""
  build_isolation:
    description: Build the kmirror wheel in an isolated environment (pip fetches the build backend, unpinned).
      Default is to use the controller's setuptools when it has one (pinned in locks/bootstrap.txt, works
      offline), isolation otherwise.
    type: bool
"""

RETURN = r"""
wheels:
  description: The wheels in I(dest), with their SHA-256.
  type: list
  elements: dict
  returned: always
requirements:
  description: What the hosts install (C(kmirror==VERSION)).
  type: list
  elements: str
  returned: always
version:
  description: kmirror's version.
  type: str
  returned: always
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule

# Bump when what goes into the wheelhouse changes: a wheelhouse built by an older recipe is rebuilt.
RECIPE = 4
REPRODUCIBLE_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip file can hold
IGNORE = shutil.ignore_patterns("build", "dist", "tests", "*.egg-info", "__pycache__", ".*")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_LABEL = re.compile(r"^[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*$")
_VERSION_LINE = re.compile(r'^(__version__\s*=\s*)(["\'])([^"\']+)\2', re.MULTILINE)
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


class Pin:
    """One entry of a hashed lock: its version, the SHA-256 of each file it may be, and its line."""

    def __init__(self, version: str, hashes: frozenset[str], line: str) -> None:
        self.version, self.hashes, self.line = version, hashes, line


def parse_lock(text: str) -> dict[str, Pin]:
    """The entries of a hashed requirements file (what `make lock` writes) by normalized name; an entry
    without a hash or a line that is not `name==version` raises ValueError naming it."""
    out: dict[str, Pin] = {}
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        m = _PIN.match(line)
        if not m:
            raise ValueError(f"not a name==version pin: {line[:80]!r}")
        hashes = frozenset(_HASH.findall(line))
        if not hashes:
            raise ValueError(f"{m.group(1)}=={m.group(2)} has no --hash=sha256:...")
        out[normalize(m.group(1))] = Pin(m.group(2), hashes, " ".join(line.split()))
    return out


def read_lock(module: AnsibleModule, path: str) -> dict[str, Pin]:
    try:
        return parse_lock(read_text(path))
    except OSError as e:
        module.fail_json(msg=f"lock {path}: {e.strerror}; write it with make lock (locks/hosts.txt)")
    except ValueError as e:
        module.fail_json(msg=f"lock {path}: {e}; every line must be name==version with --hash (make lock)")
    raise AssertionError("unreachable")


def set_local_version(module: AnsibleModule, src: str, label: str) -> None:
    """Append +LABEL to __version__ in the build's copy of the source (src/kmirror/__init__.py)."""
    init = os.path.join(src, "src", "kmirror", "__init__.py")
    text = read_text(init)
    m = _VERSION_LINE.search(text)
    if not m:
        module.fail_json(msg=f'{init}: no __version__ = "..." line to add the local version {label!r} to')
    base = m.group(3).split("+", 1)[0]
    text = text[: m.start()] + f'{m.group(1)}"{base}+{label}"' + text[m.end() :]
    with open(init, "w") as fh:
        fh.write(text)


def source_digest(source: str) -> str:
    """A digest of the files the kmirror wheel is built from (what IGNORE leaves)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(source):
        ignored = IGNORE(root, dirs + files)
        dirs[:] = sorted(d for d in dirs if d not in ignored)
        for name in sorted(f for f in files if f not in ignored):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, source).encode() + b"\0")
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def reusable(dest: str, stamp_text: str) -> list[str] | None:
    """The wheelhouse's wheels when it was built from this very source, locks and options; None: build."""
    stamp = os.path.join(dest, ".source-sha256")
    if not os.path.isfile(stamp) or read_text(stamp).strip() != stamp_text:
        return None
    return sorted(n for n in os.listdir(dest) if n.endswith(".whl")) or None


def read_text(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(filename: str) -> str:
    return normalize(filename.split("-", maxsplit=1)[0])


def wheel_requires(path: str, extras: list[str]) -> list[str]:
    """The names a wheel requires (Requires-Dist), with those of EXTRAS."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = line.split(":", 1)[1].strip()
            extra = _EXTRA_MARKER.search(req)
            m = _NAME.match(req)
            if m and (extra is None or extra.group(1) in extras):
                out.append(normalize(m.group(1)))
    return out


def source_pin(module: AnsibleModule, req: str, locks: list[tuple[str, dict[str, Pin]]]) -> tuple[str, Pin]:
    """The name and lock entry of a source build (name, or name==version): the first lock that has it."""
    m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([^\s;]+))?\s*$", req)
    if not m:
        module.fail_json(msg=f"source_builds: {req!r} is not name or name==version")
        raise AssertionError("unreachable")
    name, version = normalize(m.group(1)), m.group(2)
    for _, lock in locks:
        pin = lock.get(name)
        if pin is not None and version in (None, pin.version):
            return name, pin
    module.fail_json(
        msg=f"source_builds: {req} is not pinned in {' or '.join(p for p, _ in locks)}; add it to the lock's "
        "source and run make lock (the source distribution is downloaded only with its hash)"
    )
    raise AssertionError("unreachable")


def build_from_source(
    module: AnsibleModule,
    name: str,
    pin: Pin,
    *,
    python: str,
    cache: str,
    pip: list[str],
    pip_args: list[str],
) -> str:
    """The path of a wheel of NAME built with PYTHON from its sdist, downloaded with PIN's hashes (cached in
    CACHE, in a directory of its own per set of hashes: another lock entry builds again)."""
    prefix = f"{name.replace('-', '_')}-{pin.version}-".lower()
    tag = run_out(module, [python, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"])
    where = os.path.join(cache, hashlib.sha256(" ".join(sorted(pin.hashes)).encode()).hexdigest()[:16])
    os.makedirs(where, exist_ok=True)
    for n in sorted(os.listdir(where)):
        if n.lower().startswith(prefix) and n.endswith(".whl") and n.split("-")[2] in (tag, "py3", "py2.py3"):
            return os.path.join(where, n)
    with tempfile.TemporaryDirectory(prefix="kmirror-sdist-") as tmp:
        req = os.path.join(tmp, "requirements.txt")
        with open(req, "w") as fh:
            fh.write(pin.line + "\n")
        sdists = os.path.join(tmp, "sdist")
        fetch = ["download", "--quiet", "--require-hashes", "--no-deps", "--no-binary", ":all:"]
        run(module, [*pip, *fetch, "--dest", sdists, "-r", req, *pip_args])
        out = os.path.join(tmp, "out")
        wheel = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        run(module, [*wheel, "--wheel-dir", out, *[os.path.join(sdists, n) for n in os.listdir(sdists)]])
        built = [n for n in os.listdir(out) if n.endswith(".whl")]
        if len(built) != 1:
            module.fail_json(msg=f"building {name}=={pin.version} gave {built}")
        shutil.copyfile(os.path.join(out, built[0]), os.path.join(where, built[0]) + ".tmp")
        os.replace(os.path.join(where, built[0]) + ".tmp", os.path.join(where, built[0]))
    return os.path.join(where, built[0])


def run_out(module: AnsibleModule, cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        module.fail_json(msg=f"{' '.join(cmd)} failed (exit {proc.returncode})", stderr=proc.stderr)
    return proc.stdout.strip()


def run(module: AnsibleModule, cmd: list[str], **kwargs: object) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "SOURCE_DATE_EPOCH": REPRODUCIBLE_EPOCH}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, **kwargs)
    if proc.returncode != 0:
        module.fail_json(
            msg=f"{' '.join(cmd)} failed (exit {proc.returncode})", stdout=proc.stdout, stderr=proc.stderr
        )


def file_digest(path: str | None) -> str | None:
    return hashlib.sha256(read_text(path).encode()).hexdigest() if path and os.path.isfile(path) else None


def main() -> None:  # noqa: PLR0912, PLR0915 - an Ansible module's main: its argument spec and one sequence
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "lock": {"type": "path", "required": True},
            "extras": {"type": "list", "elements": "str", "default": []},
            "python_version": {"type": "str", "default": "3.11"},
            "platforms": {
                "type": "list",
                "elements": "str",
                "default": ["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
            },
            "pip_args": {"type": "list", "elements": "str", "default": []},
            "build_isolation": {"type": "bool"},
            "local_version": {"type": "str", "default": ""},
            "source_builds": {"type": "list", "elements": "str", "default": []},
            "source_lock": {"type": "path"},
            "build_python": {"type": "path"},
            "build_cache": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isfile(os.path.join(p["source"], "pyproject.toml")):
        module.fail_json(
            msg=f"{p['source']} has no pyproject.toml; set kmirror_worker_source_dir to the "
            "worker's source directory"
        )
    if p["local_version"] and not _LABEL.match(p["local_version"]):
        module.fail_json(
            msg=f"local_version {p['local_version']!r}: give letters and digits separated by dots "
            "(a PEP 440 local version label in its normal form, e.g. site.2)"
        )
    lock = read_lock(module, p["lock"])
    locks = [(p["lock"], lock)]
    if p["source_lock"]:
        locks.insert(0, (p["source_lock"], read_lock(module, p["source_lock"])))
    if "pip" not in lock:
        module.fail_json(msg=f"lock {p['lock']}: no pip in it; the hosts install with the wheelhouse's pip")
    built_pins = dict(source_pin(module, r, locks) for r in p["source_builds"])
    pip = [sys.executable, "-m", "pip"]
    dest = p["dest"]
    stamp_text = json.dumps(
        [
            RECIPE,
            source_digest(p["source"]),
            file_digest(p["lock"]),
            file_digest(p["source_lock"]),
            p["extras"],
            p["python_version"],
            p["platforms"],
            p["pip_args"],
            p["source_builds"],
            p["build_python"],
            p["local_version"],
        ]
    )
    names = reusable(dest, stamp_text) if os.path.isdir(dest) else None
    sums_path = os.path.join(dest, "SHA256SUMS")
    if names and os.path.isfile(sums_path):
        # Built from this very source and locks before: nothing to build or download.
        sums = read_text(sums_path)
        listed = {line.split()[1]: line.split()[0] for line in sums.splitlines() if line.strip()}
        if sorted(listed) == names:
            own = next(n for n in names if wheel_name(n) == "kmirror")
            module.exit_json(
                changed=False,
                wheels=[{"name": n, "sha256": listed[n]} for n in names],
                requirements=[f"kmirror=={own.split('-')[1]}"],
                version=own.split("-")[1],
                manifest=sums,
                copied=[],
                removed=[],
                reused=True,
            )
    if p["build_isolation"] is None:
        try:
            import setuptools  # noqa: F401

            p["build_isolation"] = False
        except ImportError:
            p["build_isolation"] = True
    with tempfile.TemporaryDirectory(prefix="kmirror-wheelhouse-") as tmp:
        src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
        shutil.copytree(p["source"], src, ignore=IGNORE)
        if p["local_version"]:
            set_local_version(module, src, p["local_version"])
        build = [*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", out, src]
        if not p["build_isolation"]:
            build.insert(4, "--no-build-isolation")
        run(module, build)
        own = [n for n in os.listdir(out) if n.endswith(".whl")]
        if len(own) != 1:
            module.fail_json(msg=f"expected one kmirror wheel, found {own}")
        own_path = os.path.join(out, own[0])
        version = own[0].split("-")[1]
        missing = [n for n in wheel_requires(own_path, p["extras"]) if n not in lock and n not in built_pins]
        if missing:
            module.fail_json(
                msg=f"lock {p['lock']} lacks {', '.join(missing)}, required by kmirror "
                f"{'[' + ','.join(p['extras']) + ']' if p['extras'] else ''}{version}: run make lock"
            )
        # Every other wheel from the lock, each file checked by pip against the lock's hashes; no resolution
        # (--no-deps): the lock is the whole set.
        requirements = os.path.join(tmp, "requirements.txt")
        with open(requirements, "w") as fh:
            fh.writelines(pin.line + "\n" for name, pin in sorted(lock.items()) if name not in built_pins)
        download = [
            *pip, "download", "--quiet", "--require-hashes", "--no-deps", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", p["python_version"], "--dest", out,
        ]  # fmt: skip
        for plat in p["platforms"]:
            download += ["--platform", plat]
        run(module, [*download, "-r", requirements, *p["pip_args"]])
        if built_pins:
            python = p["build_python"] or f"/usr/bin/python{p['python_version']}"
            cache = p["build_cache"] or os.path.join(os.path.dirname(os.path.abspath(dest)), "source-builds")
            for name, pin in built_pins.items():
                built = build_from_source(
                    module, name, pin, python=python, cache=cache, pip=pip, pip_args=p["pip_args"]
                )
                shutil.copyfile(built, os.path.join(out, os.path.basename(built)))
        wanted = {}
        for n in sorted(os.listdir(out)):
            if not n.endswith(".whl"):
                continue
            digest, name = sha256(os.path.join(out, n)), wheel_name(n)
            # Built here (kmirror, the source builds): the digest of what was built. Downloaded: the lock's
            # hash, which pip has matched the file with (checked again here).
            if name != "kmirror" and name not in built_pins and digest not in lock[name].hashes:
                module.fail_json(
                    msg=f"{n}: SHA-256 {digest} is not among the hashes of {name} in {p['lock']}"
                )
            wanted[n] = digest
        present = {}
        if os.path.isdir(dest):
            present = {n: sha256(os.path.join(dest, n)) for n in os.listdir(dest) if n.endswith(".whl")}
        sums = "".join(f"{h}  {n}\n" for n, h in wanted.items())
        old_sums = read_text(sums_path) if os.path.isfile(sums_path) else None
        to_copy = [n for n, h in wanted.items() if present.get(n) != h]
        to_remove = [n for n in present if n not in wanted]
        changed = bool(to_copy or to_remove or old_sums != sums)
        if changed and not module.check_mode:
            os.makedirs(dest, exist_ok=True)
            for n in to_copy:
                shutil.copyfile(os.path.join(out, n), os.path.join(dest, n) + ".tmp")
                os.replace(os.path.join(dest, n) + ".tmp", os.path.join(dest, n))
            for n in to_remove:
                os.unlink(os.path.join(dest, n))
            with open(sums_path + ".tmp", "w") as fh:
                fh.write(sums)
            os.replace(sums_path + ".tmp", sums_path)
        if not module.check_mode:
            os.makedirs(dest, exist_ok=True)
            with open(os.path.join(dest, ".source-sha256"), "w") as fh:
                fh.write(stamp_text + "\n")
    module.exit_json(
        changed=changed,
        wheels=[{"name": n, "sha256": h} for n, h in wanted.items()],
        requirements=[f"kmirror=={version}"],
        version=version,
        manifest=sums,
        copied=to_copy,
        removed=to_remove,
        diff={
            "before": "".join(f"{h}  {n}\n" for n, h in sorted(present.items())),
            "after": sums,
            "before_header": f"{dest}/SHA256SUMS",
            "after_header": f"{dest}/SHA256SUMS",
        },
    )


if __name__ == "__main__":
    main()
