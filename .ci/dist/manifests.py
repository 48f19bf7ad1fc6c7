#!/usr/bin/env python3
"""Checks the package managers' manifests `cargo xtask dist` wrote (called by
.ci/dist.sh, with Debian's python3-jsonschema and python3-yaml).

  manifests.py DIST SCHEMAS VERSION BASE_URL

- winget (DIST/winget/*.yaml): each file validates against the vendored schema
  its ManifestType and ManifestVersion name (SCHEMAS/VERSION/...); all three
  name the same package and version; the installer is this build's MSI: its
  URL, its SHA-256 and its ProductCode and UpgradeCode (read with msiinfo).
- scoop (DIST/scoop/forza-relay.json): the version; the URL is BASE_URL/ the
  Windows zip, and the hash that zip's; autoupdate's pattern, given the
  version, is that URL again.
"""

import glob
import hashlib
import json
import os
import subprocess
import sys

import jsonschema
import yaml


def fail(message):
    print(f"manifests: FAILED: {message}", flush=True)
    sys.exit(1)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def msi_property(msi, name):
    table = subprocess.run(["msiinfo", "export", msi, "Property"], check=True,
                           capture_output=True, text=True).stdout
    for line in table.splitlines()[3:]:
        key, _, value = line.rstrip("\r").partition("\t")
        if key == name:
            return value
    fail(f"{msi} has no {name}")


def main():
    if len(sys.argv) != 5:
        fail(__doc__)
    dist, schemas, version, base_url = sys.argv[1:]
    base_url = base_url.rstrip("/")

    files = sorted(glob.glob(os.path.join(dist, "winget", "*.yaml")))
    if len(files) != 3:
        fail(f"{len(files)} winget files in {dist}/winget, not 3")
    manifests = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            manifest = yaml.safe_load(f)
        kind, schema_version = manifest.get("ManifestType"), manifest.get("ManifestVersion")
        schema_path = os.path.join(schemas, schema_version, f"manifest.{kind}.{schema_version}.json")
        if not os.path.isfile(schema_path):
            fail(f"{path}: no vendored schema {schema_path}")
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.path))
        if errors:
            fail(f"{path} against {schema_path}:\n"
                 + "\n".join(f"  {list(e.path)}: {e.message}" for e in errors))
        print(f"manifests: {os.path.basename(path)} is a valid {kind} manifest ({schema['$id']})")
        manifests[kind] = manifest
    if set(manifests) != {"version", "installer", "defaultLocale"}:
        fail(f"winget manifest types {sorted(manifests)}")
    for kind, m in manifests.items():
        if (m["PackageIdentifier"], m["PackageVersion"]) != (manifests["version"]["PackageIdentifier"], version):
            fail(f"the {kind} manifest is {m['PackageIdentifier']} {m['PackageVersion']}")

    msi = os.path.join(dist, f"forza-relay-v{version}-x86_64.msi")
    installers = manifests["installer"]["Installers"]
    expected = {
        "InstallerUrl": f"{base_url}/{os.path.basename(msi)}",
        "InstallerSha256": sha256(msi).upper(),
    }
    got = {k: installers[0].get(k) for k in expected}
    if len(installers) != 1 or got != expected:
        fail(f"winget installer {got}, this build's {expected}")
    codes = {k: msi_property(msi, k) for k in ("ProductCode", "UpgradeCode")}
    entry = manifests["installer"]["AppsAndFeaturesEntries"][0]
    said = {"ProductCode": manifests["installer"]["ProductCode"], "UpgradeCode": entry["UpgradeCode"]}
    if said != codes or entry["ProductCode"] != codes["ProductCode"]:
        fail(f"winget says {said}, the MSI {codes}")
    print(f"manifests: winget names {os.path.basename(msi)}, its SHA-256 and its codes {codes}")

    with open(os.path.join(dist, "scoop", "forza-relay.json"), encoding="utf-8") as f:
        scoop = json.load(f)
    zips = sorted(glob.glob(os.path.join(dist, f"forza-relay-v{version}-x86_64-pc-windows-*.zip")))
    if len(zips) != 1:
        fail(f"Windows zips: {zips}")
    arch = scoop["architecture"]["64bit"]
    url = f"{base_url}/{os.path.basename(zips[0])}"
    if scoop["version"] != version or arch["url"] != url or arch["hash"] != sha256(zips[0]):
        fail(f"scoop says {scoop['version']} {arch}, this build is {version} {url} {sha256(zips[0])}")
    pattern = scoop["autoupdate"]["architecture"]["64bit"]["url"]
    if "$version" not in pattern or pattern.replace("$version", version) != url:
        fail(f"scoop's autoupdate URL {pattern} does not give {url}")
    if scoop.get("persist") != "forza-relay.toml" or scoop.get("bin") != "forza-relay.exe":
        fail(f"scoop's bin {scoop.get('bin')} and persist {scoop.get('persist')}")
    print(f"manifests: scoop names {os.path.basename(zips[0])} and its SHA-256; autoupdate's URL pattern gives it")


if __name__ == "__main__":
    main()
