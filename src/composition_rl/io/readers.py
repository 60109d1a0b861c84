"""Read verifiable problems from JSON arrays, JSONL, Parquet or reasoning-gym generators.

Every row becomes a :class:`~composition_rl.records.Problem` or a reject with its reason;
``len(rows) == len(problems) + len(rejects)`` always holds.

Field detection (first present wins): question ``problem``, ``question``, ``prompt``;
answer ``answer``, ``final_answer``, ``ground_truth`` (also verl's ``reward_model.ground_truth``).
A worked ``solution`` is used only as a fallback, through its last ``\\boxed{}``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.grading.extract import last_boxed  # the verifier's: nested and escaped braces
from composition_rl.records import Problem

__all__ = [
    "BadLine",
    "DEFAULT_RG_SPECS",
    "InputError",
    "LoadResult",
    "RGSpec",
    "ReaderConfig",
    "import_reasoning_gym",
    "last_boxed",
    "load_problems",
    "load_reasoning_gym",
    "read_rows",
    "set_aside",
]

QUESTION_FIELDS = ("problem", "question", "prompt")
ANSWER_FIELDS = ("answer", "final_answer", "ground_truth")


class InputError(ValueError):
    """An input file cannot be read at all (missing, wrong format, no usable field)."""


@dataclass(frozen=True)
class ReaderConfig:
    """How rows become Problems.

    Args:
        question_field: force the question field instead of detecting it.
        answer_field: force the answer field instead of detecting it.
        max_question_chars: longer questions are rejected (``over_long``).
        max_answer_chars: longer answers are rejected (``over_long``).
    """

    question_field: str | None = None
    answer_field: str | None = None
    max_question_chars: int = 8000
    max_answer_chars: int = 500

    def __post_init__(self) -> None:
        if self.max_question_chars < 1 or self.max_answer_chars < 1:
            raise ValueError(
                f"max_question_chars={self.max_question_chars} and max_answer_chars="
                f"{self.max_answer_chars} must be positive"
            )


@dataclass
class LoadResult:
    """Problems kept, rows rejected (each with ``row``, ``reason``, ``detail``), and the source."""

    problems: list[Problem]
    rejects: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    rows: int = 0
    config: ReaderConfig | None = None

    @property
    def counts_add_up(self) -> bool:
        """Whether every row read is either a problem or a reject (nothing lost, nothing twice)."""
        return self.rows == len(self.problems) + len(self.rejects)

    def rejected_note(self, where: str) -> str:
        """One line for a file some of whose rows were rejected: how many of how many, and
        the top reasons with an example ("" when none was)."""
        if not self.rejects:
            return ""
        top = Counter(r["reason"] for r in self.rejects).most_common(3)
        first: dict[str, str] = {}
        for r in self.rejects:
            first.setdefault(r["reason"], r["detail"])
        return (f"{where}: {len(self.rejects):,} of {self.rows:,} rows rejected, {len(self.problems):,} problems kept: "
                + "; ".join(f"{n:,} {why} (e.g. {first[why]})" for why, n in top))

    def why_empty(self, where: str) -> str:
        """Why no row became a Problem: the top reasons with counts, the columns seen and the
        flags that would fix it (one message for every command that reads problems)."""
        if not self.rows:
            return f"{where}: no rows (an empty file or an empty JSON array)"
        top = Counter(r["reason"] for r in self.rejects).most_common(3)
        first = {}
        for r in self.rejects:
            first.setdefault(r["reason"], r["detail"])
        parts = [f"{n} {why} (e.g. {first[why]})" for why, n in top]
        msg = f"{where}: no usable problem: all {self.rows} rows rejected: " + "; ".join(parts)
        cols: list[str] = []
        for r in self.rejects[:200]:
            rec = r.get("record")
            if isinstance(rec, dict):
                cols.extend(str(k) for k in rec if str(k) not in cols)
        if cols:
            shown = ", ".join(cols[:12]) + (", ..." if len(cols) > 12 else "")
            msg += f". Columns seen: {shown}"
            cfg = self.config or ReaderConfig()
            if cfg.question_field is None and not any(c in QUESTION_FIELDS for c in cols):
                msg += f"; none is a question field ({'/'.join(QUESTION_FIELDS)}): name yours with --question-field COLUMN"
            if cfg.answer_field is None and not any(c in ANSWER_FIELDS for c in cols):
                msg += f"; none is an answer field ({'/'.join(ANSWER_FIELDS)}): name yours with --answer-field COLUMN"
        elif top and top[0][0] == "bad_json":
            msg += f". Supported formats: {SUPPORTED}; the format comes from the file name"
        return msg


# name suffix -> format; compressed files carry one more suffix (``.jsonl.gz``, ``.csv.zst``)
FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv",
           ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"PAR1": "parquet", b"PK\x03\x04": "zip"}
SUPPORTED = "JSON array, JSONL, CSV, TSV (header row) or Parquet, optionally .gz or .zst"
# what a file that is no text at all is, by its first bytes (a NUL byte otherwise)
_NOT_TEXT = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image",
             b"%PDF": "a PDF document", b"RIFF": "a RIFF (WebP, WAV, AVI) file", b"\xff\xfe": "UTF-16 text",
             b"\xfe\xff": "UTF-16 text"}


def _not_text(head: bytes) -> str | None:
    """What ``head`` (a file's first bytes) is when it cannot be a text format, else None.

    >>> _not_text(b"\\x89PNG\\r\\n"), _not_text(b'{"question": 1}'), _not_text(b"a\\x00b")
    ('a PNG image', None, 'binary data')
    """
    kind = next((v for k, v in _NOT_TEXT.items() if head.startswith(k)), None)
    if kind is None and b"\x00" in head:
        kind = "binary data"
    return kind


def detect_format(path: str | os.PathLike) -> tuple[str, str | None]:
    """``(format, compression)`` of a problem file from its name, checked against its first bytes.

    Raises :class:`InputError` naming the format for files it cannot read (zip archives,
    spreadsheets, unknown suffixes whose content is not JSON).

    >>> import gzip
    >>> _ = Path("math.jsonl.gz").write_bytes(gzip.compress(b'{"problem": "1+1?", "answer": 2}\\n'))
    >>> detect_format("math.jsonl.gz")
    ('jsonl', 'gzip')
    """
    p = Path(path)
    suffixes = [x.lower() for x in p.suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    inner = suffixes[-2] if compression and len(suffixes) > 1 else (suffixes[-1] if suffixes and not compression else "")
    with open(p, "rb") as f:
        head = f.read(512)
    magic = next((v for k, v in _MAGIC.items() if head.startswith(k)), None)
    kind = None if magic else _not_text(head)
    if kind is not None:  # not "is this Latin-1?" for each line of an image
        fix = "re-save it as UTF-8" if kind == "UTF-16 text" else f"give a problem file ({SUPPORTED})"
        raise InputError(f"{p}: {kind}, not a problem file: {fix}")
    if magic in ("gzip", "zstd"):
        compression = magic  # compressed whatever its name says
    elif compression is not None:
        raise InputError(f"{p}: named {suffixes[-1]} but not {compression}-compressed (first bytes {head!r})")
    if magic == "zip" or inner in (".xlsx", ".xls", ".zip", ".ods"):
        raise InputError(f"{p}: a zip archive or spreadsheet ({inner or 'zip'}) is not supported; "
                         f"save it as CSV, or as one of: {SUPPORTED}")
    if magic == "parquet":
        return "parquet", None
    fmt = FORMATS.get(inner)
    if fmt is None:
        if inner and inner not in (".txt", ""):
            raise InputError(f"{p}: unknown format {inner!r}; supported: {SUPPORTED}")
        fmt = "sniff"  # no telling suffix: JSON array or JSONL by the first character
    return fmt, compression


def _read_bytes(p: Path, compression: str | None) -> bytes:
    if compression is None:
        return p.read_bytes()
    import pyarrow as pa  # a core dependency; its zstd codec saves declaring zstandard

    with pa.input_stream(str(p), compression=compression) as f:
        return f.read()


def read_rows(path: str | os.PathLike) -> list[Any]:
    """Raw rows of a JSON array / JSONL / CSV / TSV / Parquet file, optionally gzip or zstd
    compressed (the only place raw dicts live). A JSONL line that is not JSON becomes a
    marker row that :func:`problems_from_rows` rejects with its line number."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a file ({SUPPORTED})")
    try:
        fmt, compression = detect_format(p)
        data = _read_bytes(p, compression)
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            return pq.read_table(pa.BufferReader(data)).to_pylist()
        # bytes that are not UTF-8 (a Latin-1 row) become lone surrogates: the rows that hold
        # them are rejected by line number below, the rest of the file is read
        text = data.decode("utf-8-sig", errors="surrogateescape")
    except InputError:
        raise
    except Exception as e:  # unreadable parquet, corrupt archive, permissions
        raise InputError(f"{p}: cannot read ({type(e).__name__}: {e})") from e
    if fmt in ("csv", "tsv"):
        return _csv_rows(p, text, "\t" if fmt == "tsv" else ",")
    stripped = text.lstrip()
    if fmt == "json" or (fmt == "sniff" and stripped.startswith("[")):
        bad = _NOT_UTF8.search(text)
        if bad is not None:  # one document: no row can be set aside
            raise InputError(f"{p}: {_not_utf8(text, bad.start())}; a JSON array must be UTF-8 throughout")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if fmt == "json":
                raise InputError(f"{p}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
                                 + _tabular_hint(text)) from e
        else:
            if isinstance(data, dict):
                for key in ("data", "rows", "problems", "train"):
                    if isinstance(data.get(key), list):
                        data = data[key]
                        break
            if not isinstance(data, list):
                raise InputError(f"{p}: expected a JSON array of objects, found {type(data).__name__}")
            return data
    rows: list[Any] = []
    hint = ""
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        bad = _NOT_UTF8.search(line)
        if bad is not None:
            rows.append(_BadLine(i, _not_utf8(line, bad.start(), i)))
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == 1:
                hint = _tabular_hint(text)
            rows.append(_BadLine(i, f"line {i} is not valid JSON: {e.msg}{hint}"))
    if hint and all(isinstance(r, _BadLine) for r in rows):
        # a table under a JSON name: one line that says so, not a bad_json reason per row
        raise InputError(f"{p}: not JSON or JSONL{hint}")
    return rows


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8


def _not_utf8(text: str, pos: int, line: int | None = None, column: bool = True) -> str:
    """Where ``text`` (decoded with surrogateescape) has its first byte that is not UTF-8."""
    if line is None:
        line = text.count("\n", 0, pos) + 1
    byte = ord(text[pos]) - 0xDC00
    at = f" at column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}" if column else ""
    return (f"line {line} is not UTF-8 text (byte 0x{byte:02x}{at}; Latin-1 or Windows-1252? "
            "re-save the file as UTF-8)")


def _tabular_hint(text: str) -> str:
    """A hint when text that failed to parse as JSON looks like a CSV or TSV table."""
    lines = [x for x in text.splitlines()[:3] if x.strip()]
    if not lines or lines[0].lstrip().startswith(("{", "[")):
        return ""
    for sep, name in (("\t", "TSV (.tsv)"), (",", "CSV (.csv)"), (";", "CSV with ';' separators (.csv)")):
        n = lines[0].count(sep)
        if n and all(x.count(sep) >= n for x in lines[1:]):
            return f"; it looks like {name}: the format comes from the file name, so rename it"
    return ""


def _csv_rows(p: Path, text: str, delimiter: str) -> list[Any]:
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    if not reader.fieldnames:
        raise InputError(f"{p}: no header row (a {'TSV' if delimiter == chr(9) else 'CSV'} file needs column names)")
    if delimiter == "," and len(reader.fieldnames) == 1 and ";" in reader.fieldnames[0]:
        # the CSV that spreadsheets write where the comma is the decimal mark
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=";")
    other, other_name = ("\t", "tab-separated: rename it .tsv") if delimiter == "," else (",", "comma-separated: rename it .csv")
    if len(reader.fieldnames) == 1 and other in reader.fieldnames[0]:
        raise InputError(f"{p}: its header {reader.fieldnames[0][:60]!r} is one column, but {other_name} "
                         "(the format comes from the file name)")
    bad = _NOT_UTF8.search("".join(reader.fieldnames))
    if bad is not None:
        raise InputError(f"{p}: the header {_not_utf8(''.join(reader.fieldnames), bad.start(), 1)}")
    rows: list[Any] = []
    try:
        for row in reader:
            extra = row.pop(None, None)  # type: ignore[call-overload]
            if extra:
                rows.append(_BadLine(reader.line_num, f"line {reader.line_num} has {len(extra)} more cells than the header"))
                continue
            cell = next((v for v in row.values() if isinstance(v, str) and _NOT_UTF8.search(v)), None)
            if cell is not None:
                rows.append(_BadLine(reader.line_num, _not_utf8(cell, _NOT_UTF8.search(cell).start(), reader.line_num,
                                                                column=False)))
                continue
            rows.append({k: v for k, v in row.items() if v is not None})
    except csv.Error as e:
        raise InputError(f"{p}: line {reader.line_num} is not valid CSV: {e}") from e
    return rows


@dataclass(frozen=True)
class BadLine:
    """A line of a JSONL/CSV file that could not be parsed, kept in place of its row."""

    line: int
    error: str


_BadLine = BadLine


def _answer_forms(value: Any) -> tuple[tuple[str, ...] | None, str]:
    """All accepted forms of an answer as strings, or (None, reason)."""
    if isinstance(value, bool):
        return None, f"wrong_type: answer is a bool ({value!r})"
    if isinstance(value, int):
        return (str(value),), ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None, f"wrong_type: answer is a non-finite float ({value!r})"
        return ((str(int(value)) if value.is_integer() else repr(value)),), ""
    if isinstance(value, str):
        s = value.strip()
        return ((s,), "") if s else (None, "empty_field: answer is empty")
    if isinstance(value, (list, tuple)):
        forms: list[str] = []
        for v in value:
            sub, why = _answer_forms(v)
            if sub is None:
                return None, f"{why} (inside the answer list)"
            forms.extend(f for f in sub if f not in forms)
        return (tuple(forms), "") if forms else (None, "empty_field: answer list is empty")
    return None, f"wrong_type: answer is a {type(value).__name__}"


def _question_text(value: Any) -> tuple[str | None, str]:
    if isinstance(value, str):
        s = value.strip()
        return (s, "") if s else (None, "empty_field: question is empty")
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        users = [m.get("content") for m in value if m.get("role") == "user"]
        if users and isinstance(users[-1], str) and users[-1].strip():
            return users[-1].strip(), ""
        return None, "empty_field: chat prompt has no user message"
    if value is None:
        return None, "missing_field: question is null"
    return None, f"wrong_type: question is a {type(value).__name__}"


def _pick(row: dict[str, Any], forced: str | None, names: Sequence[str]) -> str | None:
    if forced is not None:
        return forced if forced in row else None
    return next((n for n in names if n in row and row[n] is not None), None)


def _blank(value: Any) -> bool:
    """An answer cell that holds nothing: null, or a string of only spaces. The two are one
    case because a table cannot tell them apart: an empty CSV cell is how pandas and
    spreadsheets write a missing value, and it reads back as ``""``."""
    return value is None or (isinstance(value, str) and not value.strip())


def load_problems(
    path: str | os.PathLike,
    config: ReaderConfig | None = None,
    source: str | None = None,
) -> LoadResult:
    """Load a problem file into Problems plus rejects.

    Args:
        path: a ``.json`` array, ``.jsonl`` or ``.parquet`` file.
        config: field overrides and length limits.
        source: data-source name stored on each Problem (default: the file stem).

    Raises:
        InputError: the file is missing or not one of the formats, or the forced fields
            are absent from every row.

    Example:
        >>> _ = Path("toy.jsonl").write_text('{"problem": "1+1?", "answer": 2}\\n{"problem": "2+2?"}\\n')
        >>> res = load_problems("toy.jsonl")
        >>> [p.question for p in res.problems], [r["reason"] for r in res.rejects], res.rows
        (['1+1?'], ['missing_field'], 2)
        >>> len(res.problems) + len(res.rejects) == res.rows
        True
    """
    cfg = config or ReaderConfig()
    rows = read_rows(path)
    src = source or Path(path).stem
    return problems_from_rows(rows, cfg, src, where=str(path))


def problems_from_rows(
    rows: Iterable[Any], cfg: ReaderConfig, source: str, where: str = "<rows>"
) -> LoadResult:
    """Turn raw rows into Problems and rejects (shared by every reader).

    A row is read by :func:`_record_problem` (our own ``Problem`` rows, read whole) or
    :func:`_plain_problem` (any other object); either gives a Problem or a ``reason: detail``
    reject, and a question seen before (spaces folded) is a ``duplicate_question``.

    >>> res = problems_from_rows([{"problem": "1+1?", "answer": 2}, {"question": "1+1?", "answer": "2"},
    ...                           {"problem": "2+2?"}], ReaderConfig(), "toy")
    >>> [p.answers for p in res.problems], [r["reason"] for r in res.rejects], res.counts_add_up
    ([('2',)], ['duplicate_question', 'missing_field'], True)
    """
    res = LoadResult(problems=[], source=source, config=cfg)
    seen: dict[str, int] = {}
    forced_seen = {"question": False, "answer": False}

    def reject(i: int, reason: str, row: Any) -> None:
        kind, _, detail = reason.partition(": ")
        res.rejects.append(
            {"row": i, "source": source, "reason": kind, "detail": f"row {i}: {detail or kind}", "record": row}
        )

    for i, row in enumerate(rows):
        res.rows += 1
        if isinstance(row, _BadLine):
            reject(i, f"bad_json: {row.error}", None)
            continue
        if not isinstance(row, dict):
            reject(i, f"wrong_type: row is a {type(row).__name__}, not an object", row)
            continue
        if _is_record(row) and cfg.question_field is None and cfg.answer_field is None:
            # our own Problem rows (composed.jsonl, depth1.jsonl): read whole, links and all
            got = _record_problem(row)
        else:
            got = _plain_problem(i, row, cfg, source, forced_seen)
        if isinstance(got, str):
            reject(i, got, row)
            continue
        key = " ".join(got.question.split())
        if key in seen:
            reject(i, f"duplicate_question: same question as row {seen[key]}", row)
            continue
        seen[key] = i
        res.problems.append(got)
    if res.rows and not res.problems:
        if cfg.question_field and not forced_seen["question"]:
            raise InputError(f"{where}: field {cfg.question_field!r} (--question-field) is in no row")
        if cfg.answer_field and not forced_seen["answer"]:
            raise InputError(f"{where}: field {cfg.answer_field!r} (--answer-field) is in no row")
    return res


def _record_problem(row: dict[str, Any]) -> Problem | str:
    """A row written by ``Problem.to_dict()`` as its Problem, or the reject reason."""
    try:
        prob = Problem.from_dict(row)
    except (KeyError, TypeError, ValueError) as e:
        return f"bad_record: {type(e).__name__}: {e}"
    if not prob.question.strip() or not prob.answers or not all(a.strip() for a in prob.answers):
        return "empty_field: question or answers empty in a Problem record"
    return prob


def _plain_problem(i: int, row: dict[str, Any], cfg: ReaderConfig, source: str,
                   forced_seen: dict[str, bool]) -> Problem | str:
    """Row ``i`` (any object but our own records) as a Problem, or the reject reason.

    Marks in ``forced_seen`` whether the forced question / answer field was met, so that a
    file in which no row has it is refused by name rather than read as all rejects.
    """
    qf = _pick(row, cfg.question_field, QUESTION_FIELDS)
    if qf is None:
        want = cfg.question_field or "/".join(QUESTION_FIELDS)
        return f"missing_field: no question field ({want})"
    forced_seen["question"] |= cfg.question_field is not None
    question, why = _question_text(row[qf])
    if question is None:
        return why.replace("question", f"field {qf!r}")
    af = _pick(row, cfg.answer_field, ANSWER_FIELDS)
    raw_answer: Any = row.get(af) if af else None
    if af is None and cfg.answer_field is None and isinstance(row.get("reward_model"), dict):
        af, raw_answer = "reward_model.ground_truth", row["reward_model"].get("ground_truth")
    if af is None or _blank(raw_answer):
        # no answer given (null or blank alike): the solution's last box, when it has one
        sol = row.get("solution")
        boxed = last_boxed(sol) if isinstance(sol, str) else None
        if boxed:
            af, raw_answer = "solution", boxed
        elif af is not None and raw_answer is not None:
            return f"empty_field: field {af!r} is empty and no \\boxed{{}} in a solution"
        else:
            want = cfg.answer_field or "/".join(ANSWER_FIELDS)
            return f"missing_field: no answer field ({want}) and no \\boxed{{}} in a solution"
    forced_seen["answer"] |= cfg.answer_field is not None
    answers, why = _answer_forms(raw_answer)
    if answers is None:
        return why.replace("answer", f"field {af!r}", 1)
    if len(question) > cfg.max_question_chars:
        return f"over_long: field {qf!r} has {len(question)} chars > {cfg.max_question_chars}"
    if max(len(a) for a in answers) > cfg.max_answer_chars:
        return f"over_long: field {af!r} has more than {cfg.max_answer_chars} chars"
    meta = {k: _jsonable(v) for k, v in row.items() if k not in (qf, af, "id")}
    if "id" in row:
        meta["source_id"] = _jsonable(row["id"])
    meta["row"] = i
    return Problem.new(question, answers, source=source, metadata=meta)


def set_aside(problems: Iterable[Problem], why: Callable[[Problem], str | None], source: str = ""
              ) -> tuple[list[Problem], list[dict[str, Any]]]:
    """``problems`` split into those ``why`` passes (None) and rejects in the reader's shape
    (``reason: detail`` strings, as the readers give them), for a check made after loading,
    such as a prompt that does not fit the model's context.

    >>> kept, rejects = set_aside([Problem.new("Q?", "1")], lambda p: "too_long: 9 > 8")
    >>> kept, rejects[0]["reason"], rejects[0]["detail"].endswith(": 9 > 8")
    ([], 'too_long', True)
    """
    kept: list[Problem] = []
    rejects: list[dict[str, Any]] = []
    for p in problems:
        reason = why(p)
        if reason is None:
            kept.append(p)
            continue
        kind, _, detail = reason.partition(": ")
        row = p.metadata.get("row") if isinstance(p.metadata.get("row"), int) else None
        rejects.append({"row": row, "source": source or p.source, "reason": kind,
                        "detail": f"row {row if row is not None else p.id}: {detail or kind}", "record": p.to_dict()})
    return kept, rejects


_RECORD_KEYS = frozenset({"id", "question", "answers", "depth"})


def _is_record(row: dict[str, Any]) -> bool:
    """A row written by ``Problem.to_dict()`` (it carries id, answers list and depth)."""
    return _RECORD_KEYS <= row.keys() and isinstance(row.get("answers"), list)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, bool)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


# --------------------------------------------------------------------------------------------
# reasoning-gym: the built-in default source
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RGSpec:
    """One reasoning-gym generator: its registered name, how many items, and its config."""

    name: str
    size: int
    config: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"RGSpec {self.name!r}: size={self.size} must be >= 1")


# Numeric generators with small operands, so that composed chains stay readable and a tiny
# model can learn the easy end. Every answer is a single number.
DEFAULT_RG_SPECS: tuple[RGSpec, ...] = (
    RGSpec("chain_sum", 120, (("min_terms", 2), ("max_terms", 3), ("min_digits", 1), ("max_digits", 2))),
    RGSpec("basic_arithmetic", 80, (("min_terms", 2), ("max_terms", 3), ("min_digits", 1), ("max_digits", 2))),
    RGSpec("products", 60, (("min_terms", 2), ("max_terms", 2), ("min_digits", 1), ("max_digits", 2))),
    RGSpec("simple_equations", 60, (("min_terms", 2), ("max_terms", 3), ("min_value", 1), ("max_value", 20))),
    RGSpec("lcm", 40, (("min_numbers", 2), ("max_numbers", 2), ("min_value", 2), ("max_value", 30))),
    RGSpec("gsm_symbolic", 40, ()),
)


#: What fixes a missing reasoning-gym: it is an extra, not a core dependency, because it pins
#: its own dependencies exactly and only the built-in data source needs it.
RG_INSTALL = "pip install 'composition-rl[demo]'  (or only the generators: pip install 'reasoning-gym>=0.1.25,<0.2')"


def import_reasoning_gym() -> Any:
    """``reasoning_gym``, or an ImportError that names the extra to install."""
    try:
        import reasoning_gym
    except ImportError as e:
        raise ImportError(
            f"the built-in reasoning-gym data source (crl demo, crl compose without --input) needs "
            f"reasoning-gym, which is not installed: {RG_INSTALL} [{e}]"
        ) from None
    return reasoning_gym


def load_reasoning_gym(
    specs: Sequence[RGSpec] = DEFAULT_RG_SPECS,
    seed: int = 0,
    config: ReaderConfig | None = None,
    scale: int | None = None,
) -> LoadResult:
    """Generate problems with reasoning-gym's own generators (fixed seed: reproducible).

    Args:
        specs: generators, sizes and configs (default: :data:`DEFAULT_RG_SPECS`).
        seed: item ``idx`` of generator ``k`` comes from reasoning-gym's ``Random(seed + idx)``
            scheme with seed ``seed + 1000 * k``.
        config: field limits.
        scale: resize the specs proportionally to about this many problems in total.
    """
    reasoning_gym = import_reasoning_gym()
    if scale is not None:
        if scale < len(specs):
            raise ValueError(f"scale={scale} must be at least the number of generators ({len(specs)})")
        total = sum(s.size for s in specs)
        specs = [RGSpec(s.name, max(1, round(s.size * scale / total)), s.config) for s in specs]

    rows: list[dict[str, Any]] = []
    for k, spec in enumerate(specs):
        ds = reasoning_gym.create_dataset(spec.name, seed=seed + 1000 * k, size=spec.size, **dict(spec.config))
        for idx in range(spec.size):
            item = ds[idx]
            rows.append(
                {
                    "question": item["question"],
                    "answer": item["answer"],
                    "generator": spec.name,
                    "index": idx,
                }
            )
    return problems_from_rows(rows, config or ReaderConfig(), source="reasoning_gym", where="reasoning-gym")
