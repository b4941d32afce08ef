"""`tracelens annotate TRACE -o OUT.json.gz`: the trace written back with the findings added, for Perfetto."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tracelens.cli.common import add_cache_argument, add_capture_argument, command_inputs, load_with_feedback
from tracelens.cli.output import check_writable, is_stdout, status, write_output
from tracelens.cli.runs import add_rank_argument, is_run_source, open_run, run_stem
from tracelens.errors import TracelensError
from tracelens.naming import trace_stem

SUFFIX = ".tracelens.json.gz"
PERFETTO_SUFFIX = ".tracelens.pftrace"
FORMATS = ("json", "perfetto")


def default_output(trace: Path, output_format: str = "json") -> Path:
    """`x.json.gz` → `./x.tracelens.json.gz` (`./x.tracelens.pftrace` for `--format perfetto`) in the current
    directory (`tracelens.naming.trace_stem`)."""
    return Path(trace_stem(trace) + (PERFETTO_SUFFIX if output_format == "perfetto" else SUFFIX))


class AnnotateCommand:
    """Write the trace back with findings added, to open in Perfetto UI or chrome://tracing: exposed GPU idle
    gaps (by cause) and fusion opportunities on tracks of their own, the launching op, category and roofline
    figures in each kernel's args."""

    name = "annotate"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "trace", type=Path, help="a Kineto/Chrome trace (.json or .json.gz), or a run folder / tar with --rank N"
        )
        add_rank_argument(parser, "of a run folder or tar archive: the rank to annotate (required for one)")
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            help=f"the trace to write, - for stdout; gzip when it ends in .gz (default: ./<trace name>{SUFFIX})",
        )
        parser.add_argument(
            "--format",
            dest="annotate_format",
            choices=FORMATS,
            default="json",
            help="json: the trace's own JSON with the findings added (chrome://tracing, Perfetto); perfetto: a "
            f"native Perfetto protobuf trace (default name ./<trace name>{PERFETTO_SUFFIX}) in which overlapping "
            "kernels keep their own tracks, launches are flows and counters are counter tracks",
        )
        parser.add_argument("--force", action="store_true", help="overwrite an existing regular output file")
        add_capture_argument(parser)
        add_cache_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        if is_run_source(args.trace):
            return _annotate_run(args)
        if args.rank is not None:
            raise TracelensError("--rank picks a rank of a run folder or tar archive, not of one trace")
        output = args.output if args.output is not None else default_output(args.trace, _format(args))
        return _annotate(args.trace, output, args)


def _annotate_run(args: argparse.Namespace) -> int:
    """One rank of a run folder or archive: `--rank N` is required (a run has no single trace to annotate)."""
    stem = run_stem(args.trace)
    rank = "" if args.rank is None else f".rank{args.rank}"
    suffix = PERFETTO_SUFFIX if _format(args) == "perfetto" else SUFFIX
    output = args.output if args.output is not None else Path(f"{stem}{rank}{suffix}")
    check_writable(output, args.force, command_inputs(args))
    with open_run(args.trace, args.cache) as run:
        if args.rank is not None:
            return _annotate(run.pick(args.rank).path, output, args)
        if len(run.members) == 1:  # a folder holding one trace: that trace
            return _annotate(run.members[0].path, output, args)
    raise TracelensError(f"{args.trace} holds {len(run.members)} traces; pick the rank to annotate with --rank N")


def _format(args: argparse.Namespace) -> str:
    return str(getattr(args, "annotate_format", "json"))


def _annotate(path: Path, output: Path, args: argparse.Namespace) -> int:
    """Annotate the trace at `path` into `output`."""
    from tracelens.analyses import analyze
    from tracelens.renderers.perfetto import trace_additions

    inputs = command_inputs(args)
    check_writable(output, args.force, inputs)
    if _format(args) == "perfetto":
        from tracelens.renderers.pftrace import perfetto_module

        perfetto_module()  # missing package: one error line before any work
    trace = load_with_feedback(path, args.cache, capture=args.capture)
    results = analyze(trace)
    additions = trace_additions(trace, results)
    if _format(args) == "perfetto":
        from tracelens.renderers.pftrace import pftrace_bytes

        _write(output, [pftrace_bytes(trace, results, additions.slices)], args, inputs)
    else:
        from tracelens.loader.rewrite import NotStreamable, rewrite_pieces, rewrite_source, stream_pieces

        source = rewrite_source(trace)
        del trace, results  # freed before the file is read again: the peak is the larger of the two, not the sum
        gc.collect()
        try:  # range by range as the file is read: memory is a range of text plus the additions
            _write(output, stream_pieces(source, additions), args, inputs)
        except NotStreamable:  # a file the loader repaired: nothing of the first try is left; the whole text
            _write(output, rewrite_pieces(source, additions), args, inputs)
    if not is_stdout(output):
        slices, annotated = len(additions.slices), len(additions.row_args)
        status(f"Wrote {output} ({slices:,} finding slices, {annotated:,} events annotated)")
    return 0


def _write(output: Path, pieces: Iterable[Any], args: argparse.Namespace, inputs: list[Path]) -> None:
    """Write the pieces (gzipped piece by piece when `output` ends in .gz) to `output` (`write_output`)."""
    write_output(output, _gzipped(pieces) if output.name.endswith(".gz") else pieces, args.force, inputs)


def _gzipped(pieces: Iterable[Any]) -> Iterator[bytes]:
    """The gzip (level 6, mtime 0) of the pieces' concatenation, compressed and given piece by piece."""
    import gzip  # only when writing .gz: other commands never import it

    sink = _Sink()
    with gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=6, mtime=0) as handle:
        for piece in pieces:
            handle.write(piece)
            yield from sink.drain()
    yield from sink.drain()


class _Sink:
    """A write-only file that keeps what is written until `drain`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> list[bytes]:
        parts, self.parts = self.parts, []
        return parts
