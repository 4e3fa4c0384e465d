"""Merges the results of array_shard.sbatch (shard-K-of-N.h5 and .jsonl files) into one HDF5 file laid out
as one job's (the /results columns with each row's index in the whole prompt file, in input order, and
root attributes; traces stay in the shard files) and one JSONL file in input order, as one job writes it.
Usage: merge_shards.py --out merged.h5 [--jsonl merged.jsonl] DIR/shard-*-of-N.h5"""
import argparse
import collections
import hashlib
import json
import os
import re
import sys

import h5py
import numpy as np

SHARD_NAME = re.compile(r"shard-(\d+)-of-(\d+)\.h5$")
# Attributes that must agree between shards: results computed differently must not be mixed.
MUST_AGREE = ("glacier_results_format", "model_sha256", "result_settings", "mode", "tensor_types")
ROWS_PER_CHUNK = 1024  # as src/io/hdf5_results.cpp writes
# Columns of [tokens x width] per row, width their "width" attribute (each shard's largest top_logprobs, or
# prompt_logprobs for the prompt ones), and the marker past a row's own k.
WIDE_COLUMNS = {"top_logprob_ids": -1, "top_logprob_values": np.nan,
                "prompt_top_logprob_ids": -1, "prompt_top_logprob_values": np.nan}


def widen(row, width, to_width, marker):
    """A row's flat [tokens x width] values spread to to_width, the new slots holding marker."""
    if width == to_width or len(row) == 0:
        return row
    grid = np.asarray(row).reshape(-1, width)
    padded = np.full((grid.shape[0], to_width), marker, dtype=grid.dtype)
    padded[:, :width] = grid
    return padded.reshape(-1)


def fail(message):
    sys.exit("merge_shards: " + message)


def text_attr(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_shards(paths):
    shards = {}
    count = None
    for path in paths:
        m = SHARD_NAME.search(os.path.basename(path))
        if not m:
            fail(f"{path}: expected a name shard-K-of-N.h5")
        k, n = int(m.group(1)), int(m.group(2))
        if count is not None and n != count:
            fail(f"{path}: expected shard of {count}, found of {n}")
        if k in shards:
            fail(f"{path}: shard {k} given twice")
        count = n
        shards[k] = path
    if count is None:
        fail("no shard files given")
    missing = sorted(set(range(count)) - set(shards))
    if missing:
        fail(f"expected {count} shards, missing {', '.join(map(str, missing))} (did those array tasks fail?)")
    return [shards[k] for k in range(count)]


def merge(paths, out_path, prompts_path):
    n = len(paths)
    columns, dtypes, first_attrs = None, None, None
    rows = {}  # column -> list of values, in global index (then sample) order after sorting
    widths = {}  # wide column -> per row, the width its shard wrote it at
    order = []
    shard_keys = []  # per shard, its rows' (index in the whole file, sample), in input order
    total_prompts, resumes, hosts, runs = 0, 0, [], []
    for k, path in enumerate(paths):
        with h5py.File(path, "r") as f:
            if "results" not in f:
                fail(f"{path}: expected a glacier results file with group /results")
            r = f["results"]
            attrs = dict(f.attrs)
            if columns is None:
                columns = list(r.keys())
                dtypes = {c: r[c].dtype for c in columns}
                first_attrs = attrs
                for c in columns:
                    rows[c] = []
            elif sorted(r.keys()) != sorted(columns):
                fail(f"{path}: expected columns {sorted(columns)}, found {sorted(r.keys())}")
            for name in MUST_AGREE:
                if text_attr(attrs.get(name)) != text_attr(first_attrs.get(name)):
                    fail(f"{path}: attribute {name} differs from shard 0's: the shards did not run the same job")
            # A killed job leaves its last flush part-written: only the shortest column's rows are whole.
            length = min(r[c].shape[0] for c in columns)
            expected = int(attrs.get("prompt_count", -1))
            # One row a sample: every prompt has its n rows (n from the row's sampling JSON).
            samples = r["sample"][:length]
            wanted = {}
            for i, text in zip(r["index"][:length], r["sampling"][:length]):
                sampling = json.loads(text_attr(text))
                wanted[int(i)] = sampling.get("n", 1) if isinstance(sampling, dict) else 1
            rows_of = collections.Counter(int(i) for i in r["index"][:length])
            finished = sum(1 for i, want in wanted.items() if rows_of[i] == want)
            if len(wanted) != expected or finished != expected:
                fail(f"{path}: expected {expected} finished prompts, found {finished}: "
                     "rerun that array task (it resumes)")
            total_prompts += expected
            resumes += int(attrs.get("resumes", 0))
            hosts += [h for h in text_attr(attrs.get("hosts", "")).split(",") if h and h not in hosts]
            runs += [dict(run, shard=k) for run in json.loads(text_attr(attrs.get("runs", "[]")))]
            local_index = r["index"][:length]
            for c in columns:
                values = r[c][:length]
                if c in WIDE_COLUMNS:
                    widths.setdefault(c, []).extend([int(r[c].attrs.get("width", 0))] * length)
                if c == "index":
                    values = local_index * n + k  # see array_shard.sbatch: prompt c is in shard c mod n
                rows[c].extend(values)
            order.extend(zip(local_index * n + k, samples))
            shard_keys.append(sorted(zip((int(i) * n + k for i in local_index), (int(s) for s in samples))))
    if len(set(order)) != len(order):
        fail("two shards hold the same prompt index: were they cut from different prompt files?")
    sort = sorted(range(len(order)), key=lambda i: order[i])  # input order, then sample order
    tmp = out_path + ".tmp"
    with h5py.File(tmp, "w") as out:
        for name, value in first_attrs.items():
            out.attrs[name] = value
        out.attrs["prompt_count"] = np.int64(total_prompts)
        out.attrs["resumes"] = np.int64(resumes)
        out.attrs["hosts"] = ",".join(hosts)
        out.attrs["shards"] = np.int64(n)
        out.attrs["shard_files"] = ",".join(os.path.abspath(p) for p in paths)
        out.attrs["runs"] = json.dumps(runs)
        # Each shard hashed its own slice of the prompts; only the whole file's digest describes the merge.
        if "prompts_sha256" in out.attrs:
            del out.attrs["prompts_sha256"]
        if prompts_path:
            out.attrs["prompts_path"] = prompts_path
            with open(prompts_path, "rb") as whole:
                out.attrs["prompts_sha256"] = hashlib.sha256(whole.read()).hexdigest()
        group = out.create_group("results")
        for c in columns:
            data = np.empty(len(sort), dtype=object) if dtypes[c] == object else np.empty(len(sort), dtypes[c])
            to_width = max(widths[c], default=0) if c in WIDE_COLUMNS else 0
            for i, j in enumerate(sort):
                data[i] = widen(rows[c][j], widths[c][j], to_width, WIDE_COLUMNS[c]) if c in WIDE_COLUMNS else rows[c][j]
            dataset = group.create_dataset(c, data=data, dtype=dtypes[c], maxshape=(None,), chunks=(ROWS_PER_CHUNK,))
            if c in WIDE_COLUMNS:
                dataset.attrs["width"] = np.int64(to_width)
    os.replace(tmp, out_path)  # a reader never sees a half-written merge
    print(f"merge_shards: {total_prompts} results from {n} shards -> {out_path}")
    return shard_keys


def shard_jsonl_path(h5_path):
    return h5_path[: -len(".h5")] + ".jsonl"


def renumber_openai_line(line, value, local, number, where):
    """An OpenAI batch line numbers its request by its place in the prompt file the shard read (batch_req_N,
    req_N, cmpl-N or chatcmpl-N): renumbered as the whole file's request `number`, text left as written."""
    for old, new in ((f'"id":"batch_req_{local}"', f'"id":"batch_req_{number}"'),
                     (f'"request_id":"req_{local}"', f'"request_id":"req_{number}"'),
                     (f'"id":"cmpl-{local}"', f'"id":"cmpl-{number}"'),
                     (f'"id":"chatcmpl-{local}"', f'"id":"chatcmpl-{number}"')):
        line = line.replace(old, new, 1)
    if f'"id":"batch_req_{number}"' not in line:
        fail(f"{where}: expected an OpenAI batch line with id batch_req_{local} (request {local} of the shard), "
             f"found id {value.get('id')!r}")
    return line


def merge_jsonl(paths, shard_keys, out_path):
    """The shards' JSONL lines in the whole file's input order. A shard writes its lines in its own input
    order: a glacier record line for each of a prompt's rows (its n samples, in sample order), an OpenAI
    batch line (custom_id) once a prompt with every sample in it; its HDF5 rows (already checked finished)
    give each prompt's rows, so every line gets its prompt's index in the whole file."""
    n = len(paths)
    keyed = []
    for k, (path, keys) in enumerate(zip(paths, shard_keys)):
        jsonl = shard_jsonl_path(path)
        if not os.path.exists(jsonl):
            fail(f"{jsonl}: expected the JSONL results beside {path}, found no such file")
        with open(jsonl, encoding="utf-8") as f:
            text = f.read()
        if text and not text.endswith("\n"):
            fail(f"{jsonl}: expected whole lines, found a last line without its newline (was the task killed?)")
        lines = text.splitlines(keepends=True)
        samples_of = collections.defaultdict(list)  # index in the whole file -> its rows' samples
        for index, sample in keys:
            samples_of[index].append(sample)
        at = 0
        for index in sorted(samples_of):
            if at >= len(lines):
                fail(f"{jsonl}: expected lines for {len(samples_of)} prompts (as in {path}), found {len(lines)} lines")
            try:
                value = json.loads(lines[at])
            except json.JSONDecodeError as e:
                fail(f"{jsonl}:{at + 1}: expected one JSON value a line, found invalid JSON ({e.msg})")
            if isinstance(value, dict) and "custom_id" in value:  # one OpenAI line for the prompt
                local = (index - k) // n + 1
                keyed.append(((index, 0), renumber_openai_line(lines[at], value, local, index + 1, f"{jsonl}:{at + 1}")))
                at += 1
                continue
            for sample in samples_of[index]:
                where = f"{jsonl}:{at + 1}"
                try:
                    value = json.loads(lines[at]) if at < len(lines) else None
                except json.JSONDecodeError as e:
                    fail(f"{where}: expected one JSON value a line, found invalid JSON ({e.msg})")
                if not isinstance(value, dict) or value.get("sample") != sample:
                    fail(f"{where}: expected the record of sample {sample} of prompt {index} (as in {path}), "
                         f"found {'no line' if value is None else repr(lines[at][:80])}")
                keyed.append(((index, sample), lines[at]))
                at += 1
        if at != len(lines):
            fail(f"{jsonl}: expected {at} lines (the results in {path}), found {len(lines)}")
    keyed.sort(key=lambda kv: kv[0])
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.writelines(line for _, line in keyed)
    os.replace(tmp, out_path)
    print(f"merge_shards: {len(keyed)} JSON lines from {n} shards -> {out_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="merged HDF5 file to write")
    parser.add_argument("--jsonl", help="merged JSONL file to write from each shard's shard-K-of-N.jsonl")
    parser.add_argument("--prompts", help="the whole prompt file, recorded as prompts_path")
    parser.add_argument("shards", nargs="+", help="shard-K-of-N.h5 files, every K from 0 to N-1")
    args = parser.parse_args()
    paths = read_shards(args.shards)
    if args.jsonl:  # every shard's JSONL must be there before anything is written
        for path in paths:
            if not os.path.exists(shard_jsonl_path(path)):
                fail(f"{shard_jsonl_path(path)}: expected the JSONL results beside {path}, found no such file")
    shard_keys = merge(paths, args.out, args.prompts)
    if args.jsonl:
        merge_jsonl(paths, shard_keys, args.jsonl)


if __name__ == "__main__":
    main()
