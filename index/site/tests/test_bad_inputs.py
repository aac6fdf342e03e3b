# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Bad inputs are refused with the spec's message and change nothing on disk."""
import shutil

from site_testlib import check, make_wheel, run, tree_hash


def test_bad_inputs(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    dist = work / "dist"
    good = make_wheel(dist, "0.2.5+cu13")
    common = ["--site-repo", site, "--assets", f"dir:{assets}", "--release-url", "https://example.invalid/{tag}/",
              "--target", head, "--source-dir", src]
    untargeted = [a for a in common if a not in ("--target", head)]  # each flag once: the grammar refuses a second
    run(["publish", "--tag", "v0.2.5+cu13", "--wheels", good, *common], check_rc=0)

    odd = work / "odd"
    odd.mkdir()
    malformed = odd / "ffpa_attn-0.2.7+cu13.whl"
    shutil.copy(good, malformed)
    special = odd / 'ffpa_attn-0.2.7+cu13-cp312-cp312-manylinux"<b>&.whl'
    shutil.copy(good, special)
    record = make_wheel(work / "rec", "0.2.7+cu13", bad_record=True)
    dev = make_wheel(work / "dev", "0.2.7.dev3+cu13")
    rc1 = make_wheel(work / "rc", "0.2.7rc1+cu13")
    other = make_wheel(work / "other", "0.2.7+cu13")
    changed = make_wheel(work / "changed", "0.2.5+cu13", payload="# other bytes")
    # Past the bounds on dependency fields (docs/release.md, "What a wheel may declare"),
    # which pip and PyPI accept: METADATA lines written after Requires-Python.
    many_deps = make_wheel(work / "deps", "0.2.7+cu13",
                           requires_python=b">=3.10" + b"".join(b"\nRequires-Dist: dep%d" % i for i in range(10000)))
    long_dep = make_wheel(work / "long", "0.2.7+cu13", requires_python=b">=3.10\nRequires-Dist: numpy[" + b"x" * 200000 + b"]")
    docs = work / "docs"
    docs.mkdir()
    (docs / "install.md").write_text("pip install ffpa-attn --index-url https://x/whl/cu" + "14/\n")

    cases = [
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", malformed, *common], "is not a valid wheel file name", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", special, *common], "is not a valid wheel file name", {}),
        (["add", "--index-dir", site, "--release-url", "https://x/", special], "is not a valid wheel file name", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", record, *common], "does not verify against its RECORD", {}),
        (["add", "--index-dir", site, "--release-url", "https://x/", record], "does not verify against its RECORD", {}),
        (["publish", "--tag", "v0.2.8+cu13", "--wheels", other, *common],
         "tag 'v0.2.8+cu13' does not name version '0.2.7+cu13'", {}),
        (["publish", "--tag", "v0.2.7.dev3+cu13", "--wheels", dev, *common], "refusing to publish a pre-release wheel", {}),
        (["publish", "--tag", "v0.2.7rc1+cu13", "--wheels", rc1, *common], "refusing to publish a pre-release wheel", {}),
        (["publish", "--tag", "v0.2.5+cu13", "--wheels", changed, *common], "already published with different contents", {}),
        (["add", "--index-dir", site, "--release-url", "https://x/", changed], "already published with different contents",
         {}),
        (["publish", "--tag", "v0.2.7+cu" + "14", "--channel", "cu" + "14", "--wheels", other, *common], "there is no", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, "--index-only", "--site-repo", site],
         "--index-only needs --release-url", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, *common], "gh (GitHub CLI) not found",
         {"FFPA_GH": "/nonexistent/gh"}),
        # The index stays inside the site; one name, one file.
        (["add", "--index-dir", site, "--channel", "../../escape", "--release-url", "https://x/", other],
         "--channel '../../escape' is not a relative path of plain names", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, *common, "--index-prefix", "/tmp"],
         "--index-prefix '/tmp' is not a relative path", {}),
        (["add", "--index-dir", site, "--release-url", "https://x/", good, changed], "two different files named", {}),
        # One name each: no channel nests inside another (docs/release.md, "Channels and the index prefix").
        (["add", "--index-dir", site, "--channel", "cu13/x", "--release-url", "https://x/", other],
         "--channel 'cu13/x' has several parts", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, *common, "--index-prefix", "whl/cu13"],
         "--index-prefix 'whl/cu13' has several parts", {}),
        # Bounded dependency fields, through add and publish alike.
        (["add", "--index-dir", site, "--release-url", "https://x/", many_deps], "10000 Requires-Dist lines, over the", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", many_deps, *common], "10000 Requires-Dist lines, over the", {}),
        (["add", "--index-dir", site, "--release-url", "https://x/", long_dep], "is 200007 bytes long, over the", {}),
        # A release URL names one server (docs/release.md, "Release URLs").
        *[(["add", "--index-dir", site, "--release-url", url, other], message, {}) for url, message in (
            ("https://x:0/{tag}/", "port '0' is not a TCP port"), ("https://x:99999/{tag}/", "port '99999' is not a TCP port"),
            ("https://example.org./{tag}/", "ends in a dot"), ("https://{tag}.example.org/", "\"{tag}\" is in the scheme or host"))],
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, "--site-repo", site, "--assets", f"dir:{assets}",
          "--release-url", "https://x:99999/{tag}/", "--target", head, "--source-dir", src],
         "port '99999' is not a TCP port", {}),
        (["publish", "--tag", "v0.2.5+cu13", "--wheels", good, changed, *common], "two different files named", {}),
        # A --target that is not a commit of --source-dir.
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, *untargeted, "--target", "0" * 40],
         f"--target '{'0' * 40}' is not a commit of {src}", {}),
        (["publish", "--tag", "v0.2.7+cu13", "--wheels", other, *untargeted, "--target", "no-such-ref"],
         "--target 'no-such-ref' is not a commit of", {}),
        (["publish-pure", "--tag", "v0.2.7", "--wheel", make_wheel(work / "pure", "0.2.7", tag="py3-none-any"),
          "--assets", f"dir:{assets}", "--target", "0" * 40, "--source-dir", src, "--repository-url",
          "http://127.0.0.1:9/"], "is not a commit of", {"FFPA_TWINE": "/bin/true", "FFPA_CURL": "/bin/false"}),
    ]
    for args, message, env in cases:
        if env.get("FFPA_GH"):
            args = [a if a != f"dir:{assets}" else "gh:xlite-dev/ffpa-attn" for a in args]
        before = tree_hash(site, remote, assets)
        p = run(args, env=env)
        check(p.returncode == 1, f"{args[0]} {message!r}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        check(message in p.stderr, f"expected {message!r} in:\n{p.stderr}")
        check(tree_hash(site, remote, assets) == before, f"{message!r}: something changed on disk")
        print(f"refused as expected: {message}")

    # Importing a hand-written page refuses what pip must not follow,
    # naming the anchor and the reason; nothing is imported or written.
    for bad, message in ((f'href="javascript:alert(1)//{{fn}}#sha256={"a" * 64}"', "refused: a javascript: URL"),
                         (f'href="https://h/{{fn}}#sha256={"g" * 64}"', "not 64 hex digits")):
        lsite = work / ("legacy-" + message.split()[-1])
        page = lsite / "whl" / "cu13" / "ffpa-attn"
        page.mkdir(parents=True)
        fn = "ffpa_attn-0.1.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"
        (page / "index.html").write_text(f"<html><body><a {bad.format(fn=fn)}>{fn}</a></body></html>\n")
        before = tree_hash(lsite)
        p = run(["add", "--index-dir", lsite, "--release-url", "https://x/", other])
        check(p.returncode == 1 and message in p.stderr and fn in p.stderr, f"legacy import: {p.stderr}")
        check(tree_hash(lsite) == before, "legacy import: something was written")
        print(f"refused as expected: legacy {message}")

    # The override replaces the asset and the entry.
    p = run(["publish", "--tag", "v0.2.5+cu13", "--wheels", changed, *common], env={"FFPA_FORCE_UPLOAD": "1"}, check_rc=0)
    check((assets / "v0.2.5+cu13" / changed.name).read_bytes() == changed.read_bytes(), "FFPA_FORCE_UPLOAD ignored")
    print("bad inputs: OK")
