# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Fixtures of the index/site modules (the shared ones are ctest/pytest_ffpa.py's)."""
import collections

import pytest
from site_testlib import fresh_dir, make_site, make_source

ReleaseSite = collections.namedtuple("ReleaseSite", "work remote site src head assets tmp env")


@pytest.fixture
def release_site(request):
    """What a publish needs, in a fresh work directory: the site repository (a clone of a
    local bare remote), the release checkout it tags (src at head), the dir: asset store's
    place, and a private TMPDIR (tmp, and env sets it) to prove nothing is left there."""
    work = fresh_dir(request.node.name)
    remote, site = make_site(work)
    src, head = make_source(work)
    tmp = work / "tmp"
    tmp.mkdir()
    return ReleaseSite(work, remote, site, src, head, work / "assets", tmp, {"TMPDIR": str(tmp)})
