# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""cmake/FfpaPublish.cmake: the publish target, configured by cache variables and fed
by a release manifest, publishes into a dir: store and a local site remote; the
targets exist and are not part of ALL."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_ffpa import publish_probe_project


def test_cmake_targets(release_site):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "ctest"))
    import ffpa_manifest  # noqa: E402  (the shared manifest helper)
    from site_testlib import check, check_index_consistent, fresh_dir, git, make_site, make_source, make_wheel, sha256

    work, remote, site, src, head, assets, tmp, env = release_site
    dist = work / "dist"
    wheels = [make_wheel(dist, "0.2.5+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in ("cp311", "cp312")]
    pure = make_wheel(dist, "0.2.5", tag="py3-none-any")
    requirements = dist / "requirements-cu13.txt"
    requirements.write_text("ffpa-attn==0.2.5+cu13 " + " ".join(f"--hash=sha256:{sha256(w)}" for w in wheels) + "\n")
    manifest = ffpa_manifest.make("0.2.5", head, [*wheels, pure], requirements=requirements)
    (dist / "ffpa-release-manifest.json").write_text(json.dumps(manifest))
    docs = work / "docs"
    docs.mkdir()
    (docs / "install.md").write_text("pip install ffpa-attn --index-url https://x/whl/cu13/\n")
    proj = publish_probe_project(work / "proj", os.environ["FFPA_CMAKE_MODULES"],
                                 f'VERSION 0.2.5 CHANNEL cu13 WHEELS_DIR "{dist}" CLI "{os.environ["FFPA_SITE_CLI"]}" '
                                 f'DOCS "{docs}" SOURCE_DIR "{src}"')
    build = work / "build"
    subprocess.run(["cmake", "-S", str(proj), "-B", str(build), f"-DFFPA_SITE_REPO={site}",
                    f"-DFFPA_ASSETS=dir:{work / 'assets'}", "-DFFPA_RELEASE_URL=https://example.invalid/{tag}/"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)  # ALL publishes nothing
    check(not (work / "assets").exists(), "a publishing target ran as part of ALL")
    # Docs that advertise a channel the release matrix lacks stop publish before the
    # engine runs (the same FfpaDocsChannels.cmake rule as the configure guard).
    (docs / "future.md").write_text("CUDA 14: pip install ffpa-attn --index-url https://x/whl/cu" + "14/\n")
    p = subprocess.run(["cmake", "--build", str(build), "--target", "publish"], capture_output=True, text=True)
    check(p.returncode != 0 and "docs mention a channel that does not exist (channels: cu13)" in p.stdout + p.stderr
          and "future.md" in p.stdout + p.stderr, "publish refuses docs naming a missing channel\n" + p.stdout + p.stderr)
    check(not (work / "assets").exists(), "nothing was published after the docs refusal")
    (docs / "future.md").unlink()
    p = subprocess.run(["cmake", "--build", str(build), "--target", "publish"], capture_output=True, text=True)
    check(p.returncode == 0, p.stdout + p.stderr)
    check_index_consistent(site, {w.name: sha256(w) for w in wheels})
    uploaded = work / "assets" / "v0.2.5+cu13" / "requirements-cu13.txt"
    check(uploaded.is_file() and uploaded.read_bytes() == requirements.read_bytes(),
          "the manifest's requirements file is uploaded beside the wheels")
    rel = json.loads((work / "assets" / "v0.2.5+cu13" / ".release.json").read_text())
    check(rel["target"] == head, f"release not at the manifest's commit: {rel}")
    check(git("--git-dir", str(remote), "rev-parse", "gh-pages") == git("rev-parse", "HEAD", cwd=site), "not pushed")
    targets = subprocess.run(["cmake", "--build", str(build), "--target", "help"], capture_output=True, text=True).stdout
    check(all(t in targets for t in ("publish-pure", "preflight")), targets)
    print("cmake targets: OK")
