"""Loads glacier-mpi results files (HDF5, --out) into pandas, following docs/results-schema.md.

    import glacier_results as gr
    df = gr.load_results("results.h5")      # /results: one row per prompt (per sample), input order
    tr = gr.load_trace("results.h5")        # /trace: one row per timed interval, phase names
    p = gr.load_perplexity("q8.h5")         # /perplexity of a --mode perplexity run
    gr.compare_perplexity(gr.load_perplexity("f16.h5"), p)

Needs h5py and pandas (Debian: python3-h5py python3-pandas, installed by env/install-deps.sh).
"""
import dataclasses
import json
import warnings

import h5py
import numpy as np
import pandas as pd

# glacier_results_format versions whose meaning this module knows. A newer file is still loaded
# (columns are read generically) with a warning; an older or foreign one is refused.
KNOWN_FORMATS = (2, 3, 4)
# Root attributes that hold JSON text; load_attributes parses them.
JSON_ATTRIBUTES = ("options", "result_settings", "batch_job", "runs", "perplexity")
# /results columns in the schema's order (others, from newer files, follow by name).
SCHEMA_COLUMNS = ("id", "index", "sample", "status", "error", "prompt_tokens", "tokens", "text", "logprobs",
                  "finish_reason", "time_to_first_token", "total_time", "sum_logprob", "greedy", "text_bytes",
                  "prompt_digest", "sampling", "top_logprobs", "top_logprob_ids", "top_logprob_values",
                  "prompt_logprobs", "prompt_logprob_values", "prompt_top_logprob_ids", "prompt_top_logprob_values")
# Columns stored as [tokens x width] row-major in one list a row (format 3; the prompt ones format 4);
# loaded as 2-D arrays.
WIDE_COLUMNS = ("top_logprob_ids", "top_logprob_values", "prompt_top_logprob_ids", "prompt_top_logprob_values")
# /results/prompt_logprobs: -1 is "this row carries no prompt log-probs".
NO_PROMPT_LOGPROBS = -1
# /results/greedy: -1 is "not a score row".
GREEDY_NOT_SCORED = -1


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def load_attributes(path):
    """Root attributes (the provenance) as a dict; JSON attributes parsed, numbers as Python numbers."""
    with h5py.File(path, "r") as f:
        return _root_attributes(f, path)


def _root_attributes(f, path):
    attrs = {}
    for name, value in f.attrs.items():
        if isinstance(value, (bytes, str)):
            value = _text(value)
            if name in JSON_ATTRIBUTES:
                try:
                    value = json.loads(value)
                except ValueError as e:
                    raise ValueError(f"{path}: root attribute {name}: expected JSON text, found {value!r} ({e})")
        elif isinstance(value, np.generic):
            value = value.item()
        attrs[name] = value
    return attrs


def _check_format(attrs, path):
    version = attrs.get("glacier_results_format")
    if not isinstance(version, int):
        raise ValueError(f"{path}: expected a root attribute glacier_results_format (a file written by glacier_mpi), "
                         f"found {'none' if version is None else repr(version)}")
    if version < min(KNOWN_FORMATS):
        raise ValueError(f"{path}: expected results format {KNOWN_FORMATS}, found {version} (an older glacier's file)")
    if version not in KNOWN_FORMATS:
        warnings.warn(f"{path}: results format {version} is newer than this module knows ({KNOWN_FORMATS}); "
                      "columns are loaded as stored")


def _column(dataset, n):
    """Rows 0..n of one /results dataset as a pandas-ready sequence: str for strings, arrays for lists."""
    if h5py.check_string_dtype(dataset.dtype) is not None:
        strings = dataset.asstr()[:n]
        return pd.array(strings, dtype="string") if strings.ndim == 1 else list(strings)
    values = dataset[:n]
    if h5py.check_vlen_dtype(dataset.dtype) is not None or values.ndim > 1:
        return list(values)  # one numpy array per row
    return values


def load_results(path):
    """/results as a DataFrame, one row per prompt (per sample when the file has a `sample` column, per
    continuation of a `continuations` score line: its index is in `sample`), in input order (sorted by
    `index`, then `sample`). Decoded text; "no value" markers become NA:
    `error` "" on ok rows, `sum_logprob` NaN and `greedy` -1 on rows that are not scores, `text_bytes`
    empty when `text` already holds the exact bytes, `sampling` "null" for a line that could not be
    read, the timings of error rows and the time to first token of score rows, `top_logprob_ids` and
    `top_logprob_values` of rows that asked for none (the others are [tokens x width] arrays, -1 / NaN past
    the row's k), `prompt_logprobs` -1 and its three list columns on rows that carry no prompt log-probs
    (`prompt_logprob_values` keeps NaN for the first prompt token, which has no value). `greedy` is a
    nullable boolean; `text_bytes` holds bytes.
    The root attributes are in `df.attrs`."""
    with h5py.File(path, "r") as f:
        attrs = _root_attributes(f, path)
        _check_format(attrs, path)
        if "results" not in f:
            raise ValueError(f"{path}: expected a group /results, found none")
        group = f["results"]
        datasets = {name: group[name] for name in group if isinstance(group[name], h5py.Dataset)}
        # A job killed during a flush may leave some columns longer: rows past the shortest are unfinished.
        n = min((d.shape[0] for d in datasets.values()), default=0)
        df = pd.DataFrame({name: _column(d, n) for name, d in datasets.items()})
        for name in WIDE_COLUMNS:
            if name in datasets and n > 0:
                width = int(datasets[name].attrs.get("width", 0))
                # Rows that asked for no alternatives hold nothing: NA; the others [tokens x width],
                # -1 / NaN past the row's own k (its `top_logprobs`).
                df[name] = [a.reshape(-1, width) if width and len(a) else pd.NA for a in df[name]]
    if n == 0:
        df = pd.DataFrame({name: pd.Series(dtype=object) for name in datasets})
    known = [c for c in SCHEMA_COLUMNS if c in df.columns]
    df = df[known + sorted(c for c in df.columns if c not in SCHEMA_COLUMNS)]
    order = [c for c in ("index", "sample") if c in df.columns]
    if order:
        df = df.sort_values(order, kind="stable").reset_index(drop=True)
    _mark_missing(df)
    df.attrs = attrs
    return df


def _mark_missing(df):
    if df.empty:
        return
    ok = df["status"] == "ok" if "status" in df else pd.Series(True, index=df.index)
    if "error" in df:
        df["error"] = df["error"].mask(ok)
    scored = df["greedy"] != GREEDY_NOT_SCORED if "greedy" in df else pd.Series(False, index=df.index)
    if "time_to_first_token" in df:
        df["time_to_first_token"] = df["time_to_first_token"].astype("Float64").mask(~ok | scored)
    if "total_time" in df:
        df["total_time"] = df["total_time"].astype("Float64").mask(~ok)
    if "sum_logprob" in df:
        df["sum_logprob"] = df["sum_logprob"].astype("Float64")  # NaN (not a score row) becomes NA
    if "greedy" in df:
        g = df["greedy"].astype("int64")
        df["greedy"] = pd.array(np.where(g == GREEDY_NOT_SCORED, None, g == 1), dtype="boolean")
    if "text_bytes" in df:
        df["text_bytes"] = [bytes(b) if len(b) else pd.NA for b in df["text_bytes"]]
    if "sampling" in df:
        df["sampling"] = df["sampling"].where(df["sampling"] != "null", pd.NA)
    if "prompt_logprobs" in df:
        carried = df["prompt_logprobs"] != NO_PROMPT_LOGPROBS
        for name in ("prompt_logprob_values", "prompt_top_logprob_ids", "prompt_top_logprob_values"):
            if name in df:
                df[name] = [v if c and not (isinstance(v, np.ndarray) and v.size == 0) else pd.NA
                            for v, c in zip(df[name], carried)]
        df["prompt_logprobs"] = df["prompt_logprobs"].astype("Int32").mask(~carried)


def _stages_of(attrs):
    """Stages per pipeline replica: the entries of layer_split ("0:3,3:5" -> 2)."""
    split = attrs.get("layer_split", "")
    return len(split.split(",")) if split else 1


def load_trace(path):
    """/trace as a DataFrame: rank, microbatch (NA for intervals of no micro-batch), phase (categorical,
    named by /trace/phase's phase_names), start and end (seconds since the run began, rank 0's clock),
    duration, tokens, bytes; plus replica, stage and host of each rank from the root attributes. The
    trace's clock_error_s, prompt_tokens_computed and prompt_tokens_reused are in `df.attrs`."""
    with h5py.File(path, "r") as f:
        if "trace" not in f:
            raise ValueError(f"{path}: expected a group /trace, found none (was the job run with --out?)")
        t = f["trace"]
        df = pd.DataFrame({name: t[name][:] for name in ("rank", "microbatch", "phase", "start", "end", "tokens", "bytes")})
        names = [_text(n) for n in t["phase"].attrs["phase_names"]]
        clock_error = float(t.attrs.get("clock_error_s", 0.0))
        # Files written before these counters existed read as 0.
        counters = {k: int(t.attrs.get(k, 0)) for k in ("prompt_tokens_computed", "prompt_tokens_reused")}
        attrs = _root_attributes(f, path)
    bad = ~df["phase"].isin(range(len(names)))
    if bad.any():
        raise ValueError(f"{path}: /trace/phase row {int(np.flatnonzero(bad)[0])}: expected 0..{len(names) - 1}, "
                         f"found {int(df['phase'][bad].iloc[0])}")
    df["phase"] = pd.Categorical.from_codes(df["phase"].astype(int), categories=names)
    df["microbatch"] = df["microbatch"].astype("Int64").mask(df["microbatch"] < 0)
    df["duration"] = df["end"] - df["start"]
    stages = _stages_of(attrs)
    hosts = attrs.get("hosts", "").split(",") if attrs.get("hosts") else []
    df["replica"] = df["rank"] // stages
    df["stage"] = df["rank"] % stages
    df["host"] = [hosts[r] if r < len(hosts) else pd.NA for r in df["rank"]]
    df.attrs = {"clock_error_s": clock_error, **counters}
    return df


@dataclasses.dataclass
class Perplexity:
    """A --mode perplexity run: the estimate, its chunks, every scored token's NLL and the provenance."""
    ppl: float
    ppl_stderr: float        # NaN when undefined
    mean_nll: float          # nats per token
    nll_stderr: float
    n_ctx: int
    n_scored: int
    n_tokens_text: int
    chunks: pd.DataFrame     # chunk, n_scored, nll_sum, mean_nll, running_ppl
    token_nll: np.ndarray    # [chunk, token], float32, nats
    provenance: dict         # the root attributes


def load_perplexity(path):
    with h5py.File(path, "r") as f:
        if "perplexity" not in f:
            raise ValueError(f"{path}: expected a group /perplexity (a --mode perplexity run), found none")
        g = f["perplexity"]
        chunks = pd.DataFrame({name: g[name][:] for name in ("chunk", "n_scored", "nll_sum", "mean_nll", "running_ppl")})
        a = {k: v.item() for k, v in g.attrs.items()}
        token_nll = g["token_nll"][:]
        provenance = _root_attributes(f, path)
    return Perplexity(ppl=a["ppl"], ppl_stderr=a["ppl_stderr"], mean_nll=a["mean_nll"], nll_stderr=a["nll_stderr"],
                      n_ctx=a["n_ctx"], n_scored=a["n_scored"], n_tokens_text=a["n_tokens_text"], chunks=chunks,
                      token_nll=token_nll, provenance=provenance)


def compare_perplexity(base, other):
    """`other` (e.g. a quantized model) against `base` (its F16 parent) on the same text and context,
    token by token, as llama-perplexity's KL-divergence report does: the mean of ln(PPL(other)/PPL(base))
    with an uncertainty that counts the two runs' correlation, and the ratio and difference of the
    perplexities with theirs. Returns a dict of (value, uncertainty) pairs."""
    for key in ("n_ctx", "n_tokens_text"):
        if getattr(base, key) != getattr(other, key):
            raise ValueError(f"cannot compare: {key} is {getattr(base, key)} in the base run, {getattr(other, key)} in the other")
    if base.provenance.get("prompts_sha256") != other.provenance.get("prompts_sha256"):
        raise ValueError("cannot compare: the runs scored different text files (prompts_sha256 differs)")
    a = other.token_nll.astype(np.float64).ravel()
    b = base.token_nll.astype(np.float64).ravel()
    n = a.size
    if n < 2:
        raise ValueError(f"cannot compare: expected at least 2 scored tokens, found {n}")

    def mean_and_stderr(x):
        spread = np.mean(x * x) - np.mean(x) ** 2
        return np.mean(x), np.sqrt(spread / (n - 1)) if spread > 0 else 0.0

    mean_a, se_a = mean_and_stderr(a)
    mean_b, se_b = mean_and_stderr(b)
    cov = (np.mean(a * b) - mean_a * mean_b) / (n - 1)
    ln_ratio = mean_a - mean_b
    ln_ratio_unc = np.sqrt(max(se_a ** 2 + se_b ** 2 - 2 * cov, 0.0))
    ppl_a, ppl_b = np.exp(mean_a), np.exp(mean_b)
    unc_a, unc_b = ppl_a * se_a, ppl_b * se_b
    diff_unc = np.sqrt(max(unc_a ** 2 + unc_b ** 2 - 2 * ppl_a * ppl_b * cov, 0.0))
    ratio = np.exp(ln_ratio)
    return {
        "ppl": (float(ppl_a), float(unc_a)),
        "ppl_base": (float(ppl_b), float(unc_b)),
        "ln_ppl_ratio": (float(ln_ratio), float(ln_ratio_unc)),
        "ppl_ratio": (float(ratio), float(ratio * ln_ratio_unc)),
        "ppl_diff": (float(ppl_a - ppl_b), float(diff_unc)),
        "correlation": float(cov / (se_a * se_b)) if se_a > 0 and se_b > 0 else float("nan"),
    }
