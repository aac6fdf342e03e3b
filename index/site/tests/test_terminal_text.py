# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Text that reaches a terminal is clean (index/README.md, "Text the index serves"): a
yank reason with an ESC sequence, a C1 control or a bidi override is refused with
nothing written; index.json whose yanked value is neither a boolean nor a reason, whose
reason carries such characters, or whose requires-python is not a specifier set is
refused by render and verify; yanking a yanked version again (or unyanking one that is
not) succeeds and changes nothing."""
import json

from site_testlib import check, expect_refusal, make_wheel, run, tree_hash


def test_terminal_text(tmp_path):
    site = tmp_path / "site"
    whl = make_wheel(tmp_path / "w", "1.0.0+cu13")
    run(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/", whl], check_rc=0)
    page_path = site / "whl" / "cu13" / "ffpa-attn" / "index.json"

    for reason in ("\x1b]0;pwned\x07", "clear\x1b[2J", "bad \u009b31m", "fine \u202eelbats", "iso \u2067x", "bell\x07"):
        expect_refusal(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--reason", reason],
                       "pip prints the reason as is", (site,))

    run(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--reason", "broken build"], check_rc=0)
    before = tree_hash(site)
    p = run(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--reason", "broken build"], check_rc=0)
    check("already yanked" in p.stdout and tree_hash(site) == before, p.stdout + p.stderr)
    run(["unyank", "--index-dir", site, "--version", "1.0.0+cu13"], check_rc=0)
    p = run(["unyank", "--index-dir", site, "--version", "1.0.0+cu13"], check_rc=0)
    check("already not yanked" in p.stdout, p.stdout + p.stderr)

    good = page_path.read_text()
    for field, value, message in (("yanked", {"x": 1}, "not true, false or a reason"),
                                  ("yanked", 1, "not true, false or a reason"),
                                  ("yanked", "fake\x1b[2Jinstructions", "control character"),
                                  ("yanked", "x\u202e", "bidirectional override"),
                                  ("requires-python", ">=3.10.*", "not a PEP 440 specifier set"),
                                  ("requires-python", 310, "not a PEP 440 specifier set")):
        page = json.loads(good)
        page["files"][0][field] = value
        page_path.write_text(json.dumps(page))
        expect_refusal(["render", "--index-dir", site], message, (site,))
        p = run(["verify", "--index-dir", site, "--assets", tmp_path / "w"])
        check(p.returncode == 1 and message in p.stdout + p.stderr, f"verify {field}={value!r}:\n{p.stdout}{p.stderr}")
    page_path.write_text(good)
    run(["render", "--index-dir", site], check_rc=0)
