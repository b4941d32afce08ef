"""Terminal escapes (issue 32, item 4): names recorded in a trace — variant names, kernel and op names — reach
every text output with their control characters escaped, `compare` summaries included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile_run import base_document, run, write

# a generator of hostile control sequences: OSC retitle with BEL, CSI clear, C1 CSI, bidi override, DEL
SEQUENCES = ["\x1b]0;owned\x07", "\x1b[2J\x1b[H", "\x9b31m", "\u202eevil", "\x7f\x08\x08"]
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f", "\x08")


@pytest.mark.parametrize("sequence", SEQUENCES, ids=lambda s: s.encode("unicode_escape").decode()[:10])
def test_compare_escapes_recorded_variant_names(tmp_path: Path, sequence: str) -> None:
    traces = []
    for index, name in enumerate(("eager_mlp.json.gz", "compiled_mlp.json.gz")):
        document = base_document(name)
        document["tracelens_run"]["variant"] = f"v{index}{sequence}x"
        for event in document["traceEvents"]:
            if event.get("cat") == "kernel":
                event["name"] = f"{sequence}{event['name']}"
        traces.append(str(write(document, tmp_path / f"t{index}.json")))
    result = run(["compare", *traces], tmp_path, timeout_s=30)
    result.assert_clean(frozenset({0, 1}))
    leaked = [c for c in RAW if c in result.stdout]
    assert not leaked, [line for line in result.stdout.splitlines() if any(c in line for c in RAW)][:5]
