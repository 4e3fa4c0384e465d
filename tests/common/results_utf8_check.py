# Checks a glacier results file as h5py users read it: every string column of /results decodes with
# .asstr(), text_bytes holds a row's exact text bytes (Python's own decoder repairs them to the text
# column), and the JSONL of the same run, when given, carries the same strings.
# usage: results_utf8_check.py RESULTS.h5 [RESULTS.jsonl]; prints one summary line, exits 1 on a mismatch.
import json
import sys

import h5py

REPLACEMENT = "\ufffd"
# The string columns every results file has; any other string column is checked as well.
REQUIRED_STRINGS = {"id", "status", "error", "text", "finish_reason"}


def fail(message):
    print("results_utf8_check: " + message)
    sys.exit(1)


def as_hdf5_string(text):
    """A JSONL string as the HDF5 string column holds it: HDF5 strings end at a NUL, so it is replaced."""
    return text.replace("\0", REPLACEMENT)


def main():
    if len(sys.argv) not in (2, 3):
        fail("usage: results_utf8_check.py RESULTS.h5 [RESULTS.jsonl]")
    with h5py.File(sys.argv[1], "r") as f:
        results = f["results"]
        strings = {}
        for name, column in results.items():
            info = h5py.check_string_dtype(column.dtype)
            if info is None:
                continue
            if info.encoding != "utf-8":
                fail(f"/results/{name}: expected a UTF-8 string column, found encoding {info.encoding}")
            try:
                strings[name] = list(column.asstr()[:])
            except UnicodeDecodeError as e:
                fail(f"/results/{name}: not valid UTF-8: {e}")
        missing = REQUIRED_STRINGS - strings.keys()
        if missing:
            fail(f"expected string columns {sorted(REQUIRED_STRINGS)}, found none named {sorted(missing)}")
        text_bytes = [row.tobytes() for row in results["text_bytes"][:]]

    rows = len(strings["text"])
    kept = 0
    for i, (text, raw) in enumerate(zip(strings["text"], text_bytes)):
        if not raw:
            continue  # the text column is the exact text
        kept += 1
        repaired = as_hdf5_string(raw.decode("utf-8", "replace"))
        if repaired != text:
            fail(f"row {i}: text {text!r} is not text_bytes {raw!r} decoded with replacement ({repaired!r})")
        if raw == text.encode("utf-8"):
            fail(f"row {i}: text_bytes {raw!r} is stored although the text column holds it exactly")

    compared = 0
    if len(sys.argv) == 3:
        row_of_id = {row_id: i for i, row_id in enumerate(strings["id"])}
        with open(sys.argv[2], encoding="utf-8") as jsonl:
            for line_number, line in enumerate(jsonl, 1):
                record = json.loads(line)
                i = row_of_id.get(as_hdf5_string(record["id"]))
                if i is None:
                    fail(f"{sys.argv[2]}:{line_number}: id {record['id']!r} has no HDF5 row")
                for key in ("id", "status", "text", "finish_reason", "error"):
                    want = as_hdf5_string(record.get(key, ""))
                    if strings[key][i] != want:
                        fail(f"{sys.argv[2]}:{line_number}: {key} {want!r} but HDF5 row {i} has {strings[key][i]!r}")
                compared += 1
        if compared != rows:
            fail(f"{sys.argv[2]}: expected {rows} lines (one per HDF5 row), found {compared}")
    print(f"rows={rows} string_columns={len(strings)} rows_with_text_bytes={kept} jsonl_rows_compared={compared}")


if __name__ == "__main__":
    main()
