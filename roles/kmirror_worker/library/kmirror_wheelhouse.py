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
  - Downloads binary wheels of its dependencies for the hosts' Python version and platforms
    (C(pip download --only-binary=:all: --python-version ... --platform ...)), each pinned to the version
    installed on the controller when it has one (the versions the project was tested with).
  - Updates I(dest) only where a file differs, removes wheels no longer needed and writes C(SHA256SUMS).
    Reports C(changed) when I(dest) changed.
  - Remembers a digest of the source and the pins (C(.source-sha256)); when neither changed, the wheelhouse is
    reused as it is, with nothing built or downloaded.
options:
  source:
    description: The worker's source directory (holds pyproject.toml).
    type: path
    required: true
  dest:
    description: The wheelhouse directory on the controller.
    type: path
    required: true
  python_version:
    description: The hosts' Python version (C(major.minor)).
    type: str
    default: "3.11"
  platforms:
    description: The hosts' wheel platform tags, most specific first.
    type: list
    elements: str
    default: [manylinux_2_28_x86_64, manylinux2014_x86_64]
  requirements:
    description: Extra requirements or pins (e.g. C(confluent-kafka==2.16.1)); they win over the
      controller's versions.
    type: list
    elements: str
    default: []
  pin_to_controller:
    description: Pin every dependency to the version installed on the controller, when it is installed.
    type: bool
    default: true
  pip_args:
    description: Extra arguments for C(pip download) (an index URL, C(--no-index --find-links DIR) for an
      offline controller).
    type: list
    elements: str
    default: []
  source_builds:
    description:
      - Requirements (C(name==version)) whose wheels are built from their source distribution on the
        controller instead of taken from the index, with I(build_python) and the controller's system
        libraries (e.g. C(confluent-kafka==2.0.2) against Debian's librdkafka-dev, for GSSAPI).
      - The index's binary wheel of the same version is still resolved (it proves the dependency set) and
        then replaced by the built one. Built wheels are cached in I(build_cache).
    type: list
    elements: str
    default: []
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
    description: Build the kmirror wheel in an isolated environment (pip fetches the build backend). Default
      is to use the controller's setuptools when it has one (faster, works offline), isolation otherwise.
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
import importlib.metadata
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
RECIPE = 3
REPRODUCIBLE_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip file can hold
IGNORE = shutil.ignore_patterns("build", "dist", "tests", "*.egg-info", "__pycache__", ".*")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_LABEL = re.compile(r"^[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*$")
_VERSION_LINE = re.compile(r'^(__version__\s*=\s*)(["\'])([^"\']+)\2', re.MULTILINE)


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


def reusable(dest: str, stamp_text: str, pin_to_controller: bool, fixed: set[str]) -> list[str] | None:
    """The wheelhouse's wheels when it was built from this very source with these options and (when pinning
    to the controller) every dependency wheel still has the controller's version; None: build again."""
    stamp = os.path.join(dest, ".source-sha256")
    if not os.path.isfile(stamp) or read_text(stamp).strip() != stamp_text:
        return None
    names = sorted(n for n in os.listdir(dest) if n.endswith(".whl"))
    for name in names:
        dist, version = name.split("-")[:2]
        if normalize(dist) in {"kmirror", *fixed} or not pin_to_controller:
            continue
        try:
            if importlib.metadata.version(dist) != version:
                return None
        except importlib.metadata.PackageNotFoundError:
            return None
    return names or None


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


def wheel_requires(path: str) -> list[str]:
    """Requires-Dist of a wheel, without the optional (extra) ones."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = line.split(":", 1)[1].strip()
            if not re.search(r"\bextra\s*==", req):
                out.append(req.split(";", 1)[0].strip())
    return out


def pins(requires: list[str], extra: list[str], pin_to_controller: bool) -> list[str]:
    given = {normalize(m.group(1)) for r in extra if (m := _NAME.match(r))}
    out = list(extra)
    for req in requires:
        m = _NAME.match(req)
        if not m or normalize(m.group(1)) in given:
            continue
        name = m.group(1)
        version = None
        if pin_to_controller:
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                version = None
        out.append(f"{name}=={version}" if version else req)
    return out


def build_from_source(module: AnsibleModule, req: str, python: str, cache: str, pip: list[str]) -> str:
    """The path of a wheel of REQ (name==version) built from its sdist with PYTHON (cached in CACHE)."""
    m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)\s*$", req)
    if not m:
        module.fail_json(msg=f"source_builds: {req!r} is not name==version; pin the exact version")
    name, version = normalize(m.group(1)).replace("-", "_"), m.group(2)
    tag = run_out(module, [python, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"])
    os.makedirs(cache, exist_ok=True)
    for n in sorted(os.listdir(cache)):
        if n.lower().startswith(f"{name}-{version}-{tag}-".lower()) and n.endswith(".whl"):
            return os.path.join(cache, n)
    with tempfile.TemporaryDirectory(prefix="kmirror-sdist-") as tmp:
        run(module, [*pip, "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest", tmp, req])
        sdists = [os.path.join(tmp, n) for n in os.listdir(tmp)]
        out = os.path.join(tmp, "out")
        wheel = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        run(module, [*wheel, "--wheel-dir", out, *sdists])
        built = [n for n in os.listdir(out) if n.endswith(".whl")]
        if len(built) != 1:
            module.fail_json(msg=f"building {req} gave {built}")
        shutil.copyfile(os.path.join(out, built[0]), os.path.join(cache, built[0]))
    return os.path.join(cache, built[0])


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


def main() -> None:  # noqa: PLR0912, PLR0915 - an Ansible module's main: its argument spec and one sequence
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "python_version": {"type": "str", "default": "3.11"},
            "platforms": {
                "type": "list",
                "elements": "str",
                "default": ["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
            },
            "requirements": {"type": "list", "elements": "str", "default": []},
            "pin_to_controller": {"type": "bool", "default": True},
            "pip_args": {"type": "list", "elements": "str", "default": []},
            "build_isolation": {"type": "bool"},
            "local_version": {"type": "str", "default": ""},
            "source_builds": {"type": "list", "elements": "str", "default": []},
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
    pip = [sys.executable, "-m", "pip"]
    dest = p["dest"]
    digest = source_digest(p["source"])
    stamp_text = json.dumps(
        [
            RECIPE,
            digest,
            p["requirements"],
            p["pin_to_controller"],
            p["python_version"],
            p["platforms"],
            p["pip_args"],
            p["source_builds"],
            p["build_python"],
            # only when set: a wheelhouse built before this option existed stays reusable
            *([p["local_version"]] if p["local_version"] else []),
        ]
    )
    fixed = {normalize(m.group(1)) for r in p["source_builds"] if (m := _NAME.match(r))}
    names = reusable(dest, stamp_text, p["pin_to_controller"], fixed) if os.path.isdir(dest) else None
    sums_path = os.path.join(dest, "SHA256SUMS")
    if names and os.path.isfile(sums_path):
        # Built from this very source before: nothing to build or download.
        sums = read_text(sums_path)
        listed = {line.split()[1]: line.split()[0] for line in sums.splitlines() if line.strip()}
        if sorted(listed) == names:
            own = next(n for n in names if normalize(n.split("-")[0]) == "kmirror")
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
        extra = [*p["requirements"], *p["source_builds"]]
        reqs = pins(wheel_requires(own_path), extra, p["pin_to_controller"])
        download = [
            *pip,
            "download",
            "--quiet",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            p["python_version"],
            "--dest",
            out,
        ]
        for plat in p["platforms"]:
            download += ["--platform", plat]
        run(module, [*download, *p["pip_args"], own_path, *reqs])
        # pip itself, run from its wheel on the hosts: the virtualenv is created without ensurepip's
        # bundled pip and setuptools (faster, and nothing in it that the mirror does not need).
        pip_req = f"pip=={importlib.metadata.version('pip')}" if p["pin_to_controller"] else "pip"
        run(module, [*download, *p["pip_args"], "--no-deps", pip_req])
        if p["source_builds"]:
            python = p["build_python"] or f"/usr/bin/python{p['python_version']}"
            cache = p["build_cache"] or os.path.join(os.path.dirname(os.path.abspath(dest)), "source-builds")
            for req in p["source_builds"]:
                built = build_from_source(module, req, python, cache, pip)
                name = normalize(os.path.basename(built).split("-")[0])
                for n in os.listdir(out):
                    if n.endswith(".whl") and normalize(n.split("-")[0]) == name:
                        os.unlink(os.path.join(out, n))
                shutil.copyfile(built, os.path.join(out, os.path.basename(built)))
        wanted = {n: sha256(os.path.join(out, n)) for n in sorted(os.listdir(out)) if n.endswith(".whl")}
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
