"""The report's finding links (report/timeline.py:finding_links) on the eager MLP: the fusion finding and the
critical path have one, and each Perfetto hint names a slice or track that the `.pftrace` of `annotate --format
perfetto` holds (decoded with Perfetto's protos). The ranges: tests/browser/test_timeline_labels.py."""

from __future__ import annotations

import re
from pathlib import Path

import tracelens
from tests.test_pftrace import annotate, decode
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.report.timeline import finding_links

ROOT = Path(__file__).resolve().parent.parent
EAGER_MLP = ROOT / "traces" / "h200" / "eager_mlp.json.gz"


def test_hints_name_what_the_pftrace_holds(tmp_path: Path) -> None:
    trace = tracelens.load(EAGER_MLP)
    links = finding_links(trace, gpu_activity_frame(trace), tracelens.analyze(trace))
    assert any(link.label.startswith("fusion #1") for link in links)
    assert any(link.label.startswith("critical path") for link in links)
    decoded = decode(annotate(EAGER_MLP, tmp_path))
    for link in links:
        searched = re.search(r"search '([^']+)'", link.perfetto)
        if searched:
            hits = [s for s in decoded.slices if s.name.startswith(searched.group(1))]
            assert hits and all(decoded.names[s.track].startswith("fusion opportunities") for s in hits), link
        else:
            track = re.search(r"the '([^']+)' track", link.perfetto)
            assert track and any(n == track.group(1) for n in decoded.names.values()), link
