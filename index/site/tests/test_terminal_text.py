# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Text that reaches a terminal is clean (index/README.md, "Text the index serves"): a
yank reason with an ESC sequence, a C1 control or a bidi override is refused with
nothing written, and the refusal (like that of such a --release-url, option or channel)
shows those characters as \\xNN bytes, never raw; index.json whose yanked value is
neither a boolean nor a reason, whose reason carries such characters, or whose
requires-python is not a specifier set is refused by render and verify; yanking a
yanked version again (or unyanking one that is not) succeeds and changes nothing."""
import json

from site_testlib import check, expect_refusal, make_wheel, run, tree_hash


def test_terminal_text(tmp_path):
    site = tmp_path / "site"
    whl = make_wheel(tmp_path / "w", "1.0.0+cu13")
    run(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/", whl], check_rc=0)
    page_path = site / "whl" / "cu13" / "ffpa-attn" / "index.json"

    # The refusal echoes the input as \xNN bytes, never raw: a C1 control (U+009B is CSI
    # on an 8-bit terminal), an ESC sequence or a bidi override would act on the terminal
    # that shows the message.
    raw = ("\x1b", "\x07", "\u009b", "\u009d", "\u202e", "\u2067")
    for reason, shown in (("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"), ("clear\x1b[2J", "clear\\x1b[2J"),
                          ("bad \u009b31m", "bad \\xc2\\x9b31m"), ("osc \u009d0;t", "osc \\xc2\\x9d0;t"),
                          ("fine \u202eelbats", "fine \\xe2\\x80\\xaeelbats"), ("iso \u2067x", "iso \\xe2\\x81\\xa7x"),
                          ("bell\x07", "bell\\x07")):
        p = expect_refusal(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--reason", reason],
                           "pip prints the reason as is", (site,))
        check(shown in p.stderr and not any(c in p.stderr for c in raw), f"{reason!r} echoed as:\n{p.stderr!r}")
    for url in ("https://example.invalid/\u009b31m/{tag}/", "https://example.invalid/\x1b[2J/{tag}/",
                "https://example.invalid/\u202e/{tag}/"):
        for cmd in (["add", "--index-dir", site, "--release-url", url, whl], ["render", "--index-dir", site, "--release-url", url]):
            p = expect_refusal(cmd, "is refused", (site,))
            check("https://example.invalid/\\x" in p.stderr and not any(c in p.stderr for c in raw),
                  f"{cmd[0]} --release-url {url!r} echoed as:\n{p.stderr!r}")
    # Any other echoed input, through the CLI's last guard: an unknown option, a channel.
    p = run(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--x\u009b31m"])
    check(p.returncode == 2 and "\\xc2\\x9b" in p.stderr and "\u009b" not in p.stderr, repr(p.stderr))
    p = expect_refusal(["render", "--index-dir", site, "--channel", "cu\u009b31m"], "is not a relative path", (site,))
    check("\\xc2\\x9b" in p.stderr and "\u009b" not in p.stderr, repr(p.stderr))

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
