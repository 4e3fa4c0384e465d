#!/usr/bin/python3
"""Pipeline throughput model for glacier-mpi: predicts a job's tokens per second from one-rank compute
timings, the link's latency and bandwidth, micro-batch size, stages, replicas and cores. `predict` checks
it against the scaling sweep (sweep.sh); `cluster` prints predictions for a 70B model on EPYC clusters.

`experts` compares pipeline stages with expert parallelism (--expert-parallel E) for a MoE model (--gguf
FILE or --shape) on one host: for every P x E = --ranks, the weights each rank holds, one-sequence and batch decode tok/s, and
which layout wins each; --calibrate-pp fits a rank's speed to measured PP-only rates, --measured-ep sets
the expert-parallel layout's prediction against its measured rates, --check checks the entry's arithmetic.
`experts-cluster` prints the same for a Qwen3-MoE-235B-shaped model on EPYC nodes over 25 and 100 GbE."""
import argparse
import bisect
import csv
import itertools
import math
import statistics
import sys
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import nnls

# ---------------------------------------------------------------------------------------------------
# Model shapes and weight bytes

# Bytes a weight takes in each GGUF type (block size and block bytes of ggml's formats).
BYTES_PER_WEIGHT = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32,
                    "q4_k": 144 / 256, "q5_k": 176 / 256, "q6_k": 210 / 256}


def check_shape_keys(kv, want, optional, alternatives=""):
    """--shape's key=value pairs (Shape's and MoeShape's): every key of `want` given, no key outside `want`
    and `optional`, a known weight type. `alternatives`: what else --shape takes, named when keys are missing."""
    missing = [k for k in want if k not in kv]
    if missing:
        raise SystemExit(f"pipeline_model: --shape: expected {' '.join(k + '=' for k in want)}{alternatives}, missing {missing}")
    unknown = [k for k in kv if k not in want and k not in optional]
    if unknown:
        raise SystemExit(f"pipeline_model: --shape: expected only {' '.join(want + optional)}, found {unknown}")
    if kv["type"] not in BYTES_PER_WEIGHT:
        raise SystemExit(f"pipeline_model: --shape type: expected one of {sorted(BYTES_PER_WEIGHT)}, found {kv['type']}")


@dataclass
class ModelDims:
    """The dimensions a dense model (Shape) and a mixture-of-experts one (MoeShape) both state first, in this
    order (their positional constructors and --shape's required keys follow it)."""
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    type: str


@dataclass
class Shape(ModelDims):
    # Optional (0: llama's formulas): the bytes of one layer's weights as the file holds them (MoE and
    # latent-attention layers differ from the dense formula), and DeepSeek's latent KV cache, which keeps
    # kv_lora_rank + rope_dim floats a position and layer instead of every KV head's key and value.
    layer_bytes_override: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0

    @staticmethod
    def parse(text):
        """'n_embd=512 n_layer=8 ... type=q8_0 [layer_bytes=N] [kv_lora_rank=R rope_dim=D]' (sweep.sh passes
        the required part)."""
        kv = dict(item.split("=", 1) for item in text.split())
        want = ("n_embd", "n_layer", "n_head", "n_head_kv", "n_ff", "n_vocab", "type")
        optional = ("layer_bytes", "kv_lora_rank", "rope_dim")
        check_shape_keys(kv, want, optional)
        if ("kv_lora_rank" in kv) != ("rope_dim" in kv):
            raise SystemExit("pipeline_model: --shape: expected kv_lora_rank= and rope_dim= together (a latent KV cache)")
        return Shape(*(int(kv[k]) for k in want[:-1]), kv["type"], *(int(kv.get(k, 0)) for k in optional))

    @property
    def kv_dim(self):
        return self.n_embd // self.n_head * self.n_head_kv

    def layer_params(self):
        """Matrix weights of one layer: q and o (n_embd^2), k and v (n_embd x kv_dim), gate, up, down."""
        return 2 * self.n_embd * self.n_embd + 2 * self.n_embd * self.kv_dim + 3 * self.n_embd * self.n_ff

    def layer_bytes(self):
        if self.layer_bytes_override:
            return self.layer_bytes_override
        return self.layer_params() * BYTES_PER_WEIGHT[self.type]

    def kv_bytes_per_position(self):
        """K and V of one position in one layer (glacier's KV cache is f32), or the latent and the rope key
        under multi-head latent attention (compute::KvCache, ModelConfig::kv_cache_row_floats)."""
        if self.kv_lora_rank:
            return (self.kv_lora_rank + self.rope_dim) * 4
        return 2 * self.kv_dim * 4

    def head_bytes(self):
        return self.n_vocab * self.n_embd * BYTES_PER_WEIGHT[self.type]


def partition_by_bytes(shape, n_stages):
    """glacier's --partition bytes (src/pipeline/partition.cpp): equal layers, so the split that minimises
    the heaviest stage when the last one also holds the output head; ties go to earlier cuts. A Shape's layer
    bytes are whole multiples of a power-of-two fraction (BYTES_PER_WEIGHT), so partition_layers' prefix sums
    are exact and its ties fall as with (i - j) x the layer's bytes."""
    return partition_layers([shape.layer_bytes()] * shape.n_layer, shape.head_bytes(), n_stages)


def partition_layers(layer_bytes, head_bytes, n_stages):
    """The split of layers of the given bytes that minimises the heaviest stage, the last holding the head
    too; ties go to earlier cuts. The layers may differ (a MoE model's dense leading layers)."""
    L = len(layer_bytes)
    prefix = [0.0]
    for b in layer_bytes:
        prefix.append(prefix[-1] + b)
    inf = float("inf")
    best = [[inf] * (L + 1) for _ in range(n_stages + 1)]
    cut = [[-1] * (L + 1) for _ in range(n_stages + 1)]
    best[0][0] = 0.0
    for s in range(1, n_stages + 1):
        for i in range(s, L - (n_stages - s) + 1):
            for j in range(s - 1, i):
                if best[s - 1][j] == inf:
                    continue
                c = max(best[s - 1][j], prefix[i] - prefix[j] + (head_bytes if s == n_stages else 0.0))
                if c < best[s][i]:
                    best[s][i], cut[s][i] = c, j
    split, end = [], L
    for s in range(n_stages, 0, -1):
        split.insert(0, (cut[s][end], end))
        end = cut[s][end]
    return split


def parse_split(text):
    return [tuple(int(x) for x in part.split(":")) for part in text.split(",")]


# ---------------------------------------------------------------------------------------------------
# The driver's scheduler, replayed (a port of src/pipeline/scheduler.cpp). Results come back in submission
# order and the driver submits until the ring is full or nothing is buildable, then waits for the oldest
# result, so the sequence of micro-batches does not depend on timing: it is replayed once, then timed.

@dataclass
class MicroBatch:
    id: int
    tokens: int       # rows through every layer
    logits: int       # rows through the output head (sampled chunks)
    decode_keys: int = 0  # positions the decode rows attend to, summed (each reads its sequence's K and V)
    chunks: tuple = ()    # tokens of each sequence's chunk (the scheduler's micro-batches; empty: not known)


@dataclass
class _Seq:
    length: int        # tokens to feed: the prompt, then one more per generated token
    max_new: int
    n_fed: int = 0
    generated: int = 0
    in_flight: int = 0
    awaiting: bool = False
    finished: bool = False


def replay_scheduler(prompts, n_slots, ubatch, max_in_flight, decode_groups):
    """prompts: [(prompt_tokens, generated)] in queue order. Returns the driver's actions in order:
    ('submit', MicroBatch) and ('poll', id)."""
    waiting = deque(_Seq(p, g) for p, g in prompts if g > 0 and p > 0)
    active, free_slots = [], n_slots
    actions, in_flight, next_id, ring = [], 0, 0, deque()

    def build():
        nonlocal next_id
        budget, chunks, logits, keys = ubatch, [], 0, 0
        decoding = sum(1 for a in active if not a.finished and a.n_fed > 0 and a.n_fed >= a.length - 1)
        cap = max(1, -(-decoding // decode_groups))
        taken = 0
        for a in active:
            if budget == 0:
                break
            remaining = a.length - a.n_fed
            if a.finished or a.awaiting or remaining <= 0:
                continue
            is_decode = a.n_fed > 0 and remaining == 1
            if is_decode and taken >= cap:
                continue
            n = min(remaining, budget)
            last = n == remaining
            a.awaiting = last
            logits += last
            chunks.append((a, last, n))
            a.n_fed += n
            keys += a.n_fed if is_decode else 0
            a.in_flight += 1
            budget -= n
            taken += is_decode
        if not chunks:
            return None
        mb = MicroBatch(next_id, ubatch - budget, logits, keys, tuple(n for _, _, n in chunks))
        next_id += 1
        return mb, chunks

    while True:
        while waiting and free_slots > 0:  # admit()
            active.append(waiting.popleft())
            free_slots -= 1
        while in_flight < max_in_flight:
            built = build()
            if built is None:
                break
            actions.append(("submit", built[0]))
            ring.append(built)
            in_flight += 1
        if in_flight == 0:
            if active:
                raise RuntimeError("replay: active sequences but nothing to schedule")
            if not waiting:
                return actions
            continue
        mb, chunks = ring.popleft()  # poll(): the oldest result
        actions.append(("poll", mb.id))
        in_flight -= 1
        for a, sampled, _ in chunks:  # apply()
            a.in_flight -= 1
            if a.finished or not sampled:
                continue
            a.awaiting = False
            a.generated += 1
            if a.generated >= a.max_new:
                a.finished = True
            else:
                a.length += 1
        for a in [a for a in active if a.finished and a.in_flight == 0]:  # retire_finished()
            active.remove(a)
            free_slots += 1


def scheduler_options(n_stages, decode_groups=0):
    """src/app/job.cpp scheduler_options(): P decode groups unless --decode-groups says otherwise, 2P
    micro-batches in the ring or one a group if more (one for a single stage)."""
    groups = decode_groups if decode_groups > 0 else n_stages
    return {"max_in_flight": 1 if n_stages == 1 else max(2 * n_stages, groups), "decode_groups": groups}


# ---------------------------------------------------------------------------------------------------
# Compute cost: a matrix product over n rows of W weight bytes takes W * tau(n) seconds on one core.
# tau(n) is the kernels' batch efficiency, measured: it is not smooth in n (glacier's packed int8 GEMM runs
# 3- and 4-row tiles plus a remainder tile, and a separate path for 1-2 rows), so for decode rows it is kept
# at every row count up to DENSE_UPTO (the ramp run times each) and linear between the larger counts the
# samples have. Prefill rows get their own tau (fit_prefill_tau), their head rows the decode one. A stage's
# micro-batch costs its layers' bytes x tau(tokens) and, on the last stage, the head's bytes x
# tau(logits), and each decode row reads its sequence's K and V at every earlier position in every layer
# at kv_tau a byte (fitted with tau: fit_decode_cost). A prefill row's attention, the norms and the
# embedding are not modelled apart: they ride along in tau.

DENSE_UPTO = 32
RIDGE = 1e-3  # weight of tau's second differences: only settles knots no sample pins down
MAX_CLASS_WEIGHT = 10  # a (rows, logits) class of micro-batches weighs sqrt(count), at most sqrt(this)


class Tau:
    def __init__(self, knots, values):
        self.knots, self.values = np.asarray(knots, float), np.asarray(values, float)

    def __call__(self, n):
        if n <= 0:
            return 0.0
        k, v = self.knots, self.values
        if n >= k[-1]:  # linear continuation of the last segment
            return float(v[-1] + (v[-1] - v[-2]) / (k[-1] - k[-2]) * (n - k[-1]))
        return float(np.interp(n, k, v))


def hat_basis(n, knots):
    """Weights of each knot's value in tau(n) (linear interpolation, the last segment extended)."""
    row = np.zeros(len(knots))
    if n <= 0:
        return row
    j = min(max(int(np.searchsorted(knots, n)), 1), len(knots) - 1)
    f = (n - knots[j - 1]) / (knots[j] - knots[j - 1])
    row[j - 1], row[j] = 1 - f, f
    return row


def fit_tau(samples, shape):
    """samples: [(tokens, logits, seconds)] of one-rank micro-batches (all layers + head). tau at the knots
    the samples reach, fitted to the median time of each (tokens, logits) class (a busy machine gives a few
    slow outliers) by non-negative least squares on relative residuals."""
    classes = defaultdict(list)
    for tokens, logits, seconds in samples:
        classes[(tokens, logits)].append(seconds)
    # Every row count up to DENSE_UPTO (decode groups: the tiles make tau jagged there), then the row
    # counts the samples have above it (prefill micro-batches and their remainders): each knot is pinned
    # by data, and tau is linear between them. Coarse fixed knots between sparse samples let the fit
    # wander (it once put 15x the cost at 192 rows, where no sample was, that it put at 512).
    top = max(max(t, l) for t, l in classes)
    above = sorted({n for t, l in classes for n in (t, l) if n > DENSE_UPTO})
    knots = np.asarray([k for k in range(1, DENSE_UPTO + 1) if k <= top] + above, float)
    if len(knots) < 2:
        knots = np.asarray([1.0, 2.0])
    layers_b, head_b = shape.n_layer * shape.layer_bytes(), shape.head_bytes()
    rows, rhs = [], []
    for (tokens, logits), secs in classes.items():
        w = math.sqrt(min(len(secs), MAX_CLASS_WEIGHT))
        a = layers_b * hat_basis(tokens, knots) + head_b * hat_basis(logits, knots)
        rows.append(w * a / statistics.median(secs))
        rhs.append(w)
    scale = statistics.median(s for _, _, s in samples) / layers_b  # a typical tau, to weigh the ridge
    for j in range(1, len(knots) - 1):
        r = np.zeros(len(knots))
        r[j - 1], r[j], r[j + 1] = 1, -2, 1
        rows.append(RIDGE * r / scale)
        rhs.append(0.0)
    values, _ = nnls(np.asarray(rows), np.asarray(rhs))
    return Tau(knots, values)


# ---------------------------------------------------------------------------------------------------
# Timing: a discrete-event simulation of every rank of every replica. Ranks that compute at the same time
# share the cores (processor sharing: each runs at min(1, cores / busy ranks)); a rank waiting for a
# message takes no core (glacier's waits yield and sleep). Stage loops keep two send buffers, the driver
# 2P: a send waits for the buffer's previous message to have left. An injected delay holds a send; it is
# posted at the sender's next call into the channel: at its next poll when it waits, or at the next layer
# boundary when it computes (the layer hook).

@dataclass
class Link:
    latency_s: float       # per message, one way (the transport's, without the injected delay)
    bandwidth_Bps: float   # payload bytes per second
    inject_s: float = 0.0  # --inject-latency-ms


@dataclass
class Node:
    """Compute of one rank: seconds for a product over n rows of W bytes, split into the stage's layers."""
    tau: object            # Tau or a callable n -> seconds per weight byte
    cores: float           # cores the job's ranks share on this host
    # Seconds a byte of K and V that a decode row reads (every earlier position of its sequence, every
    # layer): the sweep's model holds as many bytes of KV as of weights at 32 sequences of 60 positions. Prefill rows
    # share each key tile over the chunk's rows, so their attention rides along in tau.
    kv_tau: float = 0.0
    # Speed of each rank while two or more ranks of its host compute at once, against one alone: they
    # share the memory bandwidth and the L3 (and, on a VM, whatever the host's other guests leave), so
    # two ranks on two cores do not compute twice as fast as one. Measured (calibrate_sharing).
    contention: float = 1.0
    # Seconds a message takes on top of the link to reach a rank whose host's cores all compute (more
    # ranks than cores): the rank must get a core back from a computing one (it yields, then sleeps,
    # while it waits). Measured (calibrate_sharing); processor sharing alone would hand it a share at once.
    wake_s: float = 0.0
    # Speed of each computing rank, on top of its share, while its host holds more of the job's unfinished
    # ranks than cores, however many of them compute at that moment: the kernel time-slices them, and each
    # slice starts with the caches another rank has filled (four one-stage decode replicas on two cores ran
    # 15-28% slower than two). A rank computing alone pays it too: in the clock-aligned traces of 4-stage
    # decode on two cores its compute took 1.4x the one-rank cost, about as long as with two or three
    # computing. (Tied to the ranks computing at once, the model priced an injected hop as a gain, since it
    # spreads the ranks' compute apart: 1 x 4 decode faster at 1 ms a hop than at 0.) Measured (calibrate_sharing).
    oversubscribed: float = 1.0
    head_tau: object = None  # tau of the output head's rows, when not tau (prefill: the decode fit's)


class _Rank:
    def __init__(self, gen, host):
        # host: an int, or for an expert group simulated as one rank (expert_parallel_programs) the tuple of
        # its members' hosts, the leader's first; width: how many of them compute in the current segment.
        self.hosts = host if isinstance(host, tuple) else (host,)
        self.gen, self.host, self.width = gen, self.hosts[0], 1
        self.state, self.value = "ready", None
        self.segments, self.remaining = deque(), 0.0
        self.wait_key, self.until = None, 0.0
        self.wait_since = None  # when the current channel wait began (its polls follow from it)
        self.held = deque()  # injected-delay sends not yet posted: (due, key, bytes, dest, record)
        self.done_at = None


# A waiting rank sees a message, or posts a held send, only when its wait loop polls. glacier's channel
# wait (src/comm/mpi_channel.cpp) yields POLL_YIELDS times (taken as POLL_YIELD_S each), then sleeps
# min(POLL_MAX_US, i) us at iteration i; each sleep overshoots by about POLL_OVERSHOOT_S (Linux's timer
# slack and wake-up: 64 us sleeps took 135 us on the Zen 5 VM). So a wait polls about every 140 us in
# its first millisecond and every 275 us after about 30 ms.
POLL_YIELDS, POLL_YIELD_S, POLL_MAX_US, POLL_OVERSHOOT_S = 64, 1e-6, 200, 75e-6


def _poll_offsets(n):
    offsets = [POLL_YIELDS * POLL_YIELD_S]  # polls are continuous while the rank yields
    for i in range(POLL_YIELDS, POLL_YIELDS + n):
        offsets.append(offsets[-1] + min(POLL_MAX_US, i) * 1e-6 + POLL_OVERSHOOT_S)
    return offsets


POLL_OFFSETS = _poll_offsets(20000)  # seconds from a wait's start to each of its polls (about 5 s of them)


def first_poll(wait_since, when):
    """When a rank whose wait began at wait_since (None: a plain sleep, no polls) sees what happened at `when`."""
    if wait_since is None:
        return when
    d = when - wait_since
    if d <= POLL_OFFSETS[0]:
        return when
    j = bisect.bisect_left(POLL_OFFSETS, d)
    if j >= len(POLL_OFFSETS):  # past the table: polls POLL_MAX_US + overshoot apart
        step = POLL_MAX_US * 1e-6 + POLL_OVERSHOOT_S
        return wait_since + POLL_OFFSETS[-1] + math.ceil((d - POLL_OFFSETS[-1]) / step) * step
    return wait_since + POLL_OFFSETS[j]


def simulate(programs, hosts, cores_by_host, link, contention=1.0, wake_s=0.0, oversubscribed=1.0):
    """programs: one generator per rank yielding ('compute', [segment seconds][, width]), ('send', key, bytes,
    dest) (returns a record whose 'left' time is filled in once the message has left), ('wait_left', record),
    ('recv', key), ('sleep', seconds), ('now',) (returns the time). hosts[i]: the host of rank i (ranks of
    one host share its cores), or a tuple of hosts for an expert group run as one rank, whose first `width`
    members compute in a segment (each takes a share of its host; the group runs at its slowest member's)."""
    ranks = [_Rank(p, h) for p, h in zip(programs, hosts)]
    arrival = {}
    t = 0.0
    eps = 1e-12

    def post(rank, key, nbytes, dest, record, when):
        record["left"] = when
        # A rank whose host's cores all compute gets its message only once it has a core back.
        host = ranks[dest].host
        busy = sum(r.hosts[:r.width].count(host) for r in ranks if r.state == "compute")
        late = wake_s if busy >= cores_by_host[host] else 0.0
        arrival[key] = when + link.latency_s + nbytes / link.bandwidth_Bps + late

    def held_seen(rank):  # when the rank posts its oldest held send: at a layer boundary or a poll
        due = rank.held[0][0]
        return due if rank.state in ("compute", "ready") else first_poll(rank.wait_since, due)

    def service(rank):  # the channel's service(): due held sends are posted
        while rank.held and held_seen(rank) <= t + eps:
            due, key, nbytes, dest, record = rank.held.popleft()
            post(rank, key, nbytes, dest, record, t)

    def advance(rank):
        while True:
            service(rank)
            try:
                req = rank.gen.send(rank.value)
            except StopIteration:
                rank.state, rank.done_at, rank.wait_since = "done", t, t
                return
            rank.value = None
            kind = req[0]
            if kind == "now":
                rank.value = t
            elif kind == "compute":
                segs = deque(s for s in req[1] if s > 0)
                rank.width = req[2] if len(req) > 2 else 1
                if segs:
                    rank.segments, rank.remaining, rank.state = segs, segs.popleft(), "compute"
                    return
            elif kind == "send":
                _, key, nbytes, dest = req
                record = {"left": None}
                if link.inject_s > 0:
                    rank.held.append((t + link.inject_s, key, nbytes, dest, record))
                else:
                    post(rank, key, nbytes, dest, record, t)
                rank.value = record
            elif kind == "sleep":
                rank.state, rank.wait_key, rank.wait_since = "wait_left", {"left": t + req[1]}, None
                return
            elif kind == "wait_left":
                record = req[1]
                if record["left"] is None or record["left"] > t + eps:
                    rank.state, rank.until, rank.wait_key, rank.wait_since = "wait_left", None, record, t
                    return
            elif kind == "recv":
                key = req[1]
                if key not in arrival or arrival[key] > t + eps:
                    rank.state, rank.wait_key, rank.wait_since = "recv", key, t
                    return
            else:
                raise ValueError(kind)

    for r in ranks:
        advance(r)
    while True:
        busy_by_host, live_by_host = defaultdict(int), defaultdict(int)
        for r in ranks:
            for h in r.hosts[:r.width] if r.state == "compute" else ():
                busy_by_host[h] += 1
            for h in r.hosts if r.state != "done" else ():
                live_by_host[h] += 1
        host_rate = {h: min(1.0, cores_by_host[h] / n) * (contention if n >= 2 else 1.0)
                     * (oversubscribed if live_by_host[h] > cores_by_host[h] else 1.0) for h, n in busy_by_host.items() if n}
        rate = {id(r): min(host_rate[h] for h in r.hosts[:r.width]) for r in ranks if r.state == "compute"}
        nxt = math.inf
        for r in ranks:
            if r.state == "compute":
                nxt = min(nxt, t + r.remaining / rate[id(r)])
            elif r.state == "recv" and r.wait_key in arrival:
                nxt = min(nxt, first_poll(r.wait_since, arrival[r.wait_key]))
            if r.state in ("recv", "wait_left", "done") and r.held:  # waiting ranks post held sends when due
                nxt = min(nxt, held_seen(r))
            if r.state == "wait_left" and r.wait_key["left"] is not None:
                nxt = min(nxt, first_poll(r.wait_since, r.wait_key["left"]))
        if nxt == math.inf:
            if all(r.state == "done" and not r.held for r in ranks):
                return t, [r.done_at for r in ranks]
            raise RuntimeError("simulation deadlock: " + ", ".join(r.state for r in ranks))
        dt = nxt - t
        t = nxt
        for r in ranks:
            if r.state == "compute":
                r.remaining -= dt * rate[id(r)]
                if r.remaining <= eps * 10:
                    service(r)  # a layer boundary: the layer hook calls the channel
                    if r.segments:
                        r.remaining = r.segments.popleft()
                    else:
                        r.state = "ready"
            elif r.state == "done":
                service(r)  # a finished stage still waits in the channel (for the shutdown message)
            elif r.state in ("recv", "wait_left"):
                service(r)
                if r.state == "recv" and r.wait_key in arrival and first_poll(r.wait_since, arrival[r.wait_key]) <= t + eps:
                    r.state = "ready"
                elif (r.state == "wait_left" and r.wait_key["left"] is not None
                      and first_poll(r.wait_since, r.wait_key["left"]) <= t + eps):
                    r.state = "ready"
        for r in ranks:
            if r.state == "ready":
                advance(r)


# ---------------------------------------------------------------------------------------------------
# A job: replicas x stages, each replica replays the scheduler over its share of the prompts.

WIRE_BYTES_PER_TOKEN = {"f32": lambda e: 4 * e, "f16": lambda e: 2 * e, "bf16": lambda e: 2 * e,
                        "int8": lambda e: e + 4}  # int8: one byte a value and a float scale a token
HEADER_BYTES_PER_MB = 64      # forward header; per-chunk fields are a few tens of bytes more, ignored
BACK_BYTES_PER_LOGIT = 16     # sampled token id, log-prob and bookkeeping per sequence


@dataclass
class Job:
    shape: Shape
    prompts: list             # [(prompt_tokens, generated)] in input order
    n_ranks: int
    replicas: int
    ubatch: int
    slots: int
    wire: str = "f32"
    split: list = None        # [(first, last)] per stage; default: partition_by_bytes
    decode_groups: int = 0    # --decode-groups (0 = one a stage)


def share_prompts(prompts, replicas):
    """World rank 0 hands out equal shares in queue order (src/app/work_queue.cpp: guided self-scheduling;
    every job of the sweep fits the first hand-outs, so each replica gets one contiguous share)."""
    per = -(-len(prompts) // replicas)
    return [prompts[i * per:(i + 1) * per] for i in range(replicas)]


def stage_costs(job, node, split, stage, mb, per_layer_segments=True):
    """Segments (seconds on a free core) of one micro-batch on one stage: one per layer, then the head (one
    segment in all when no send is held back: then layer boundaries change nothing)."""
    first, last = split[stage]
    per_layer = job.shape.layer_bytes() * node.tau(mb.tokens) + mb.decode_keys * job.shape.kv_bytes_per_position() * node.kv_tau
    segs = [per_layer] * (last - first)
    if stage == len(split) - 1 and mb.logits > 0:
        segs.append(job.shape.head_bytes() * (node.head_tau or node.tau)(mb.logits))
    return segs if per_layer_segments else [sum(segs)]


def predict_job(job, node, link, hosts_per_replica=None):
    """Seconds the job takes (rank 0's span: first hand-out to last result) and the tokens it counts."""
    P = job.n_ranks // job.replicas
    split = job.split or partition_by_bytes(job.shape, P)
    opts = scheduler_options(P, job.decode_groups)
    fwd_bytes = WIRE_BYTES_PER_TOKEN[job.wire](job.shape.n_embd)
    programs, hosts = [], []
    for r, share in enumerate(share_prompts(job.prompts, job.replicas)):
        actions = replay_scheduler(share, job.slots, job.ubatch, opts["max_in_flight"], opts["decode_groups"])
        mbs = [a[1] for a in actions if a[0] == "submit"]
        start_delay = 0.0 if r == 0 else 2 * (link.latency_s + link.inject_s)  # ask for work, get the answer
        programs += make_replica_programs(job, node, split, r, actions, mbs, fwd_bytes, start_delay, link)
        hosts += [hosts_per_replica(r, s) if hosts_per_replica else 0 for s in range(P)]
    n_hosts = max(hosts) + 1
    _, done = simulate(programs, hosts, {h: node.cores for h in range(n_hosts)}, link, node.contention, node.wake_s,
                       node.oversubscribed)
    # Other replicas' results travel to world rank 0 (one more hop) before the job can end.
    span = max(done[r * P] + (0 if r == 0 else link.latency_s + link.inject_s) for r in range(job.replicas))
    return span


def make_replica_programs(job, node, split, r, actions, mbs, fwd_bytes, start_delay, link, work=None):
    """work(stage, mb): a generator of the stage's requests for one micro-batch's compute (default: its
    stage_costs as one compute; expert_parallel_work prices an expert group's instead)."""
    P = len(split)
    base = r * P
    segmented = link.inject_s > 0
    driver_buffers = scheduler_options(P, job.decode_groups)["max_in_flight"]  # PipelineRing: a send buffer per micro-batch in flight
    if work is None:
        def work(s, mb):
            yield ("compute", stage_costs(job, node, split, s, mb, segmented))

    def driver():
        if start_delay > 0:
            yield ("sleep", start_delay)
        sent = {}
        for act in actions:
            if act[0] == "submit":
                mb = act[1]
                yield from work(0, mb)
                if P == 1:
                    continue
                prev = sent.pop(mb.id - driver_buffers, None)
                if prev is not None:
                    yield ("wait_left", prev)
                sent[mb.id] = yield ("send", ("fwd", r, 1, mb.id), HEADER_BYTES_PER_MB + mb.tokens * fwd_bytes, base + 1)
            elif P > 1:
                yield ("recv", ("back", r, act[1]))

    def stage(s):
        sent = {}
        for mb in mbs:
            yield ("recv", ("fwd", r, s, mb.id))
            yield from work(s, mb)
            prev = sent.pop(mb.id - 2, None)  # two send buffers (src/pipeline/stage_loop.cpp)
            if prev is not None:
                yield ("wait_left", prev)
            if s == P - 1:
                key, nbytes, dest = ("back", r, mb.id), HEADER_BYTES_PER_MB + mb.logits * BACK_BYTES_PER_LOGIT, base
            else:
                key, nbytes, dest = ("fwd", r, s + 1, mb.id), HEADER_BYTES_PER_MB + mb.tokens * fwd_bytes, base + s + 1
            sent[mb.id] = yield ("send", key, nbytes, dest)

    return [driver()] + [stage(s) for s in range(1, P)]


# ---------------------------------------------------------------------------------------------------
# The design document's closed forms (pipeline-design.md, last section), for comparison: prefill of M
# micro-batches (M + P - 1) T + (P - 1) h; decode b min(G / C, 1 / T) with C = sum t_s + P h, G = P groups
# of b = sequences / G; the cores bound the rate when ranks outnumber them.

def formula_job(job, node, link):
    P = job.n_ranks // job.replicas
    split = job.split or partition_by_bytes(job.shape, P)
    fwd = WIRE_BYTES_PER_TOKEN[job.wire](job.shape.n_embd)
    share = share_prompts(job.prompts, job.replicas)[0]
    share_cores = min(1.0, node.cores / job.n_ranks)  # when every rank computes at once
    if job.n_ranks >= 2:
        share_cores *= node.contention
    h_of = lambda tokens: link.latency_s + link.inject_s + tokens * fwd / link.bandwidth_Bps
    prompt_tokens = sum(p for p, _ in share)
    new_tokens = max(g for _, g in share)
    if new_tokens <= 1:  # prefill: M full micro-batches; a sampled row per prompt spread over them
        M = math.ceil(prompt_tokens / job.ubatch)
        mb = MicroBatch(0, job.ubatch, max(1, round(len(share) / M)))
        t = [sum(stage_costs(job, node, split, s, mb)) for s in range(P)]
        return max((M + P - 1) * max(t) + (P - 1) * h_of(job.ubatch), M * sum(t) / share_cores / P if share_cores < 1 else 0)
    seqs = min(len(share), job.slots)
    G = P
    b = max(1, round(seqs / G))
    mean_context = statistics.mean(p + g / 2 for p, g in share)  # a decode row's, over its sequence's life
    mb = MicroBatch(0, b, b, round(b * mean_context))
    t = [sum(stage_costs(job, node, split, s, mb)) for s in range(P)]
    C = sum(t) + P * h_of(b)
    round_time = max(C, G * max(t))  # every sequence advances a token: b G / (b min(G / C, 1 / T))
    if share_cores < 1:
        round_time = max(round_time, G * sum(t) / (share_cores * P))
    return new_tokens * math.ceil(len(share) / job.slots) * round_time


# ---------------------------------------------------------------------------------------------------
# --decode-groups auto (src/pipeline/decode_group_choice.cpp), the same rule: G groups of b = ceil(S / G)
# rows (ceil(S / b) groups form) take a round of max(sum_s t_s(b) + P h, groups x max_s t_s(b)); the
# fewest groups from P to min(S, max_groups) within DECODE_GROUPS_NEAR_BEST of the best round per token.

DECODE_GROUPS_NEAR_BEST = 0.02


def decode_round_per_token(P, slots, hop_s, step_s, groups):
    """step_s: one callable per stage, rows -> seconds of a decode step."""
    rows = -(-slots // groups)
    formed = -(-slots // rows)
    t = [f(rows) for f in step_s]
    return max(sum(t) + P * hop_s, formed * max(t)) / slots


def choose_decode_groups(P, slots, max_groups, hop_s, step_s):
    """(groups, predicted seconds a token) as glacier's rule picks them."""
    if P == 1:
        return 1, decode_round_per_token(P, slots, hop_s, step_s, 1)
    candidates = list(range(P, max(P, min(slots, max_groups)) + 1))
    per_token = [decode_round_per_token(P, slots, hop_s, step_s, g) for g in candidates]
    best = min(per_token)
    pick = next(i for i, v in enumerate(per_token) if v <= best * (1 + DECODE_GROUPS_NEAR_BEST))
    return candidates[pick], per_token[pick]


# ---------------------------------------------------------------------------------------------------
# The sweep: calibrate on its one-rank runs, predict the rest.

def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_workloads(path):
    w = defaultdict(list)
    for row in read_csv(path):
        w[row["workload"]].append((int(row["index"]), int(row["prompt_tokens"]), int(row["generated"])))
    return {k: [(p, g) for _, p, g in sorted(v)] for k, v in w.items()}


# Workloads whose one-rank runs calibrate each workload's tau: a prefill row (a prompt token, attending to
# its own prompt) and a decode row (a sequence's next token, with its own KV and a sampled output) do not
# cost the same per weight byte, so each is fitted on its own kind of micro-batches.
CALIBRATES = {"prefill": ("prefill",), "decode": ("decode", "ramp"), "ramp": ("decode", "ramp")}


def calibrate(sweep_rows, calib_rows, workloads, shape, workload=None, fit=True):
    """tau from every micro-batch of the sweep's one-rank runs (of the workloads CALIBRATES[workload]). The scheduler replay of each run names the
    output rows of its micro-batches (the trace has only their token counts): the replay must give the
    trace's token counts, or the model's scheduler is not glacier's and nothing it predicts can be trusted."""
    runs = {row["run"]: row for row in sweep_rows
            if row["np"] == "1" and (workload is None or row["workload"] in CALIBRATES[workload])}
    by_run = defaultdict(list)
    for row in calib_rows:
        by_run[row["run"]].append((int(row["microbatch"]), int(row["tokens"]), float(row["compute_s"])))
    samples = []
    for run, mbs in by_run.items():
        if run not in runs:
            continue  # a run left out (disturbed by other work)
        cfg = runs[run]
        opts = scheduler_options(1)
        actions = replay_scheduler(workloads[cfg["workload"]], int(cfg["slots"]), int(cfg["ubatch"]),
                                   opts["max_in_flight"], opts["decode_groups"])
        replayed = [a[1] for a in actions if a[0] == "submit"]
        measured = sorted(mbs)
        if [m.tokens for m in replayed] != [tok for _, tok, _ in measured]:
            raise SystemExit(f"pipeline_model: run {run}: the replayed scheduler's micro-batches "
                             f"{[m.tokens for m in replayed][:12]}... differ from the trace's "
                             f"{[tok for _, tok, _ in measured][:12]}...")
        samples += [(m.tokens, m.logits, m.decode_keys, s) for m, (_, _, s) in zip(replayed, measured)]
    return (fit_decode_cost(samples, shape) if fit else None), samples


KV_TAU_GRID = 60  # kv_tau candidates from 0 to KV_TAU_MAX_RATIO x the weights' typical tau
KV_TAU_MAX_RATIO = 3.0


def micro_batch_seconds(shape, tau, kv_tau, tokens, logits, keys, head_tau=None):
    """The model's one-rank time of a micro-batch: every layer, the head, the decode rows' KV reads."""
    return (shape.n_layer * (shape.layer_bytes() * tau(tokens) + keys * shape.kv_bytes_per_position() * kv_tau)
            + shape.head_bytes() * (head_tau or tau)(logits))


def fit_decode_cost(samples, shape):
    """samples: [(tokens, logits, keys, seconds)] of one-rank micro-batches. tau and kv_tau: for each
    kv_tau on a grid, tau is fitted (fit_tau) to what the KV reads leave of each micro-batch; the pair
    with the least mean |log error| over every micro-batch wins. The KV term is what tells one 32-row
    decode step at 15 positions from one at 70 (about 1.5x apart in the sweep's runs); the classes of fit_tau
    cannot, they pool a row count's micro-batches over the whole run."""
    kv_b = shape.n_layer * shape.kv_bytes_per_position()
    typical = statistics.median(sec / (shape.n_layer * shape.layer_bytes() + shape.head_bytes()) for *_, sec in samples)
    best = None
    for i in range(KV_TAU_GRID + 1):
        kv_tau = KV_TAU_MAX_RATIO * typical * i / KV_TAU_GRID
        left = [(t, l, sec - keys * kv_b * kv_tau) for t, l, keys, sec in samples]
        if statistics.median(r for *_, r in left) <= 0:
            break
        tau = fit_tau([x for x in left if x[2] > 0], shape)
        err = statistics.fmean(abs(math.log(max(micro_batch_seconds(shape, tau, kv_tau, t, l, keys), 1e-12) / sec))
                               for t, l, keys, sec in samples)
        if best is None or err < best[0]:
            best = (err, tau, kv_tau)
    return best[1], best[2]


def fit_prefill_tau(samples, shape, head_tau):
    """A prefill micro-batch's rows are prompt tokens; its few output rows (the prompts that end in it) go
    through the head as decode rows do. So the head's share is taken off with the decode fit (head_tau)
    and tau of each token count the samples have is the median of what is left, per layer byte; linear
    between those counts. (One least-squares fit of both parts cannot tell a 32-token micro-batch's
    layers from its 2 head rows: it once gave the head rows 50x the cost of the layers' rows.)"""
    per = defaultdict(list)
    layers_b, head_b = shape.n_layer * shape.layer_bytes(), shape.head_bytes()
    for tokens, logits, _, seconds in samples:
        per[tokens].append(max(0.0, seconds - head_b * head_tau(logits)) / layers_b)
    knots = sorted(per)
    values = [statistics.median(per[k]) for k in knots]
    if len(knots) == 1:  # one size only: cost proportional to the rows
        knots, values = [0.0] + knots, [0.0] + values
    return Tau(knots, values)


def sweep_job(key, rows, workloads, shape):
    """A sweep configuration's Job, the tokens its rate counts (prompt tokens for prefill, generated
    ones otherwise) and its measured rate (the median of its runs)."""
    workload, np_, replicas, ubatch, wire, latency_ms, slots = key
    prompts = workloads[workload]
    job = Job(shape, prompts, np_, replicas, ubatch, slots, wire, split=parse_split(rows[0]["layer_split"]))
    tokens = sum(p for p, _ in prompts) if workload == "prefill" else sum(g for _, g in prompts)
    return job, tokens, statistics.median(float(r["tok_per_s"]) for r in rows)


@dataclass
class Cost:
    """A workload's calibrated compute: tau of its rows, of its head rows (None: tau), the KV reads."""
    tau: object
    head_tau: object
    kv_tau: float

    def node(self, cores, contention=1.0, wake_s=0.0, oversubscribed=1.0):
        return Node(self.tau, cores, contention=contention, wake_s=wake_s, oversubscribed=oversubscribed,
                    head_tau=self.head_tau, kv_tau=self.kv_tau)


def fit_speed_factor(runs, node_of, link):
    """The factor f in (0.05, 1] at which runs [(job, tokens, measured rate)] are predicted as measured on
    geometric average, node_of(f) the Node whose speed grows with f; 1 when even f = 1 predicts them no faster."""
    def log_error(f):
        return sum(math.log(tokens / predict_job(job, node_of(f), link) / measured) for job, tokens, measured in runs)
    lo, hi = 0.05, 1.0
    if log_error(hi) <= 0:
        return hi
    for _ in range(20):  # bisection
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if log_error(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


@dataclass
class Sharing:
    """What the sweep measures of ranks sharing a host's cores: Node.contention and Node.oversubscribed
    per workload (1 where the sweep has no run to fit them), and Node.wake_s."""
    contention: dict = field(default_factory=dict)
    oversubscribed: dict = field(default_factory=dict)
    wake_s: float = 0.0

    def node(self, costs, workload, cores):
        return costs[workload].node(cores, self.contention.get(workload, 1.0), self.wake_s,
                                    self.oversubscribed.get(workload, 1.0))


def is_contention_run(key):
    """The runs of two one-stage replicas (np 2 = 2 x 1, no hops) at any --ubatch: they calibrate
    Node.contention."""
    workload, np_, replicas, ubatch, wire, latency_ms, slots = key
    return (np_, replicas, wire, latency_ms) == (2, 2, "f32", 0.0)


def is_oversubscription_run(key):
    """The run that calibrates Node.oversubscribed per workload: four one-stage replicas (no hops) on the
    2 cores at the base settings."""
    workload, np_, replicas, ubatch, wire, latency_ms, slots = key
    return (np_, replicas, ubatch, wire, latency_ms) == (4, 4, 128, "f32", 0.0)


def is_wake_run(key):
    """The run that calibrates Node.wake_s: one 4-stage decode pipeline on the 2 cores at the base settings
    (decode hands a small micro-batch across a link every stage, so it is the most sensitive to it)."""
    workload, np_, replicas, ubatch, wire, latency_ms, slots = key
    return (workload, np_, replicas, ubatch, wire, latency_ms) == ("decode", 4, 1, 128, "f32", 0.0)


WAKE_MAX_S = 5e-3  # bisection bracket for wake_s: a time slice or two of Linux's scheduler


def calibrate_sharing(groups, workloads, shape, costs, args, link):
    """Sharing, from the sweep's designated runs, which are calibration then, not predictions:
    - contention per workload: the value at which the runs of two one-stage replicas (two independent
      pipelines; every --ubatch of the sweep) are predicted as measured. That is the machine's slowdown
      of two ranks computing at once, measured rather than assumed;
    - oversubscribed per workload, with that contention: the value at which four one-stage replicas on
      the two cores are predicted as measured;
    - wake_s, with both: the value at which is_wake_run's configuration is predicted as measured (0 when
      the sweep has no such run, or when even 0 predicts it slower than measured)."""
    sharing = Sharing()

    def runs_of(is_run):
        jobs = defaultdict(list)
        for key, rows in groups.items():
            if is_run(key):
                jobs[key[0]].append(sweep_job(key, rows, workloads, shape))
        return jobs

    for workload, runs in runs_of(is_contention_run).items():
        if workload not in costs:
            continue  # not calibrated: nothing to fit against
        sharing.contention[workload] = fit_speed_factor(runs, lambda c: costs[workload].node(args.cores, c), link)
    for workload, runs in runs_of(is_oversubscription_run).items():
        if workload not in costs:
            continue
        c = sharing.contention.get(workload, 1.0)
        sharing.oversubscribed[workload] = fit_speed_factor(
            runs, lambda f: costs[workload].node(args.cores, c, 0.0, f), link)
    wake_runs = [(key, rows) for key, rows in groups.items() if is_wake_run(key)]
    if wake_runs and wake_runs[0][0][0] in costs:
        (key, rows), = wake_runs
        workload = key[0]
        job, tokens, measured = sweep_job(key, rows, workloads, shape)

        def predict(w):
            sharing.wake_s = w
            return tokens / predict_job(job, sharing.node(costs, workload, args.cores), link)
        lo, hi = 0.0, WAKE_MAX_S
        if predict(lo) <= measured or predict(hi) == predict(lo):  # too slow already, or no core is ever short
            sharing.wake_s = 0.0
            return sharing
        for _ in range(20):  # the prediction falls as wake_s grows
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if predict(mid) > measured else (lo, mid)
        sharing.wake_s = (lo + hi) / 2
    return sharing


def config_key(row):
    return (row["workload"], int(row["np"]), int(row["replicas"]), int(row["ubatch"]), row["wire"],
            float(row["latency_ms"]), int(row["slots"]))


class Uncalibrated(Exception):
    """The sweep has no clean one-rank run to calibrate a workload on (a busy machine flagged them all)."""


def calibrated_model(sweep, groups, calib_rows, workloads, shape, args, link, verbose=False):
    """What the sweep calibrates: tau (and the head's tau) per workload from its one-rank runs, and how
    ranks share the cores (calibrate_sharing) from its designated multi-rank runs (whose ranks talk over link).
    Workloads it cannot calibrate (no clean one-rank micro-batch) are missing from the costs; raises
    Uncalibrated when that is every workload."""
    costs = {}
    _, decode_samples = calibrate(sweep, calib_rows, workloads, shape, "decode", fit=False)
    if not decode_samples:
        # Every workload's head rows are priced by the decode fit, so without it nothing can be calibrated.
        raise Uncalibrated("no clean one-rank decode or ramp run to calibrate on (the decode fit also prices "
                           "prefill's head rows)")
    decode_tau, kv_tau = fit_decode_cost(decode_samples, shape)
    for workload in sorted(workloads):
        if workload == "prefill":
            _, samples = calibrate(sweep, calib_rows, workloads, shape, workload, fit=False)
            if not samples:
                print(f"cannot calibrate {workload}: no clean one-rank {workload} run; its configurations are "
                      "shown measured only")
                continue
            cost = Cost(fit_prefill_tau(samples, shape, decode_tau), decode_tau, 0.0)
        else:
            cost, samples = Cost(decode_tau, None, kv_tau), decode_samples
        costs[workload] = cost
        if workload == "ramp" or not verbose:
            continue  # the decode fit
        fit_err = [abs(micro_batch_seconds(shape, cost.tau, cost.kv_tau, t, l, k, cost.head_tau) - s) / s
                   for t, l, k, s in samples]
        print(f"calibration ({workload}): {len(samples)} one-rank micro-batches; tau at rows {list(map(int, cost.tau.knots))}: "
              + ", ".join(f"{v * 1e12:.0f}" for v in cost.tau.values) + " ps a weight byte"
              + (f"; decode rows' KV reads {cost.kv_tau * 1e12:.0f} ps a byte" if cost.kv_tau else "")
              + f"; |fit error| of the micro-batches: median {100 * statistics.median(fit_err):.1f}%, "
              f"90th percentile {100 * np.percentile(fit_err, 90):.1f}%")
    sharing = calibrate_sharing(groups, workloads, shape, costs, args, link)
    if verbose:
        print("contention (speed of a rank while two compute at once, fitted to the 2 x 1 replica runs): "
              + ", ".join(f"{w} {c:.3f}" for w, c in sorted(sharing.contention.items()))
              + "; oversubscribed (speed on top of its share while the host holds more ranks than cores, fitted to the "
              "4 x 1 replica runs at the base settings): " + ", ".join(f"{w} {c:.3f}" for w, c in sorted(sharing.oversubscribed.items()))
              + f"; a message to a rank whose host's cores all compute arrives {sharing.wake_s * 1e6:.0f} us late "
              "(fitted to the 1 x 4 decode run at the base settings)")
    return costs, sharing


PREDICTED_COLUMNS = ("kind", "workload", "np", "replicas", "stages", "ubatch", "wire", "latency_ms", "slots", "runs",
                     "clean", "measured_tok_per_s", "measured_min", "measured_max", "predicted_tok_per_s",
                     "error_pct", "formula_tok_per_s", "formula_error_pct")


def predict_sweep(args):
    """Predicts every configuration the sweep measured cleanly. Configurations with only disturbed runs
    are kept measured only (clean 0, no prediction), those without any measurement are listed; a sweep
    on a busy machine still gives a table and plots of what it has."""
    shape = Shape.parse(args.shape)
    every = read_csv(args.sweep)
    # Runs during which other processes took CPU time are left out: no model of this job can know them.
    # Failed runs (status failed, no measurement) are never clean.
    sweep = [r for r in every if r.get("clean", "1") == "1" and float(r.get("other_cores", 0)) <= args.max_other_cores]
    if len(sweep) < len(every):
        print(f"left out {len(every) - len(sweep)} of {len(every)} runs that failed or during which other work "
              f"used more than {args.max_other_cores:g} cores")
    workloads = load_workloads(args.workloads)
    groups = defaultdict(list)
    for row in sweep:
        groups[config_key(row)].append(row)
    unclean = defaultdict(list)  # configurations measured only while disturbed
    unmeasured = set()  # configurations whose every run failed
    for row in every:
        key = config_key(row)
        if key in groups:
            continue
        if row.get("status", "ok") != "failed" and row["tok_per_s"]:
            unclean[key].append(row)
        else:
            unmeasured.add(key)
    unmeasured -= set(unclean)
    sweep_link = Link(args.link_latency_us * 1e-6, args.link_gbytes * 1e9)
    try:
        costs, sharing = calibrated_model(sweep, groups, read_csv(args.calibration), workloads, shape, args,
                                          sweep_link, verbose=True)
    except Uncalibrated as e:
        print(f"cannot calibrate the model: {e}; every configuration is shown measured only")
        costs, sharing = {}, Sharing()
    out = []
    for key, rows in list(groups.items()) + list(unclean.items()):
        workload, np_, replicas, ubatch, wire, latency_ms, slots = key
        if workload not in workloads:
            unmeasured.add(key)  # no finished run gave its token counts
            continue
        job, tokens, measured = sweep_job(key, rows, workloads, shape)
        pred = formula = None
        if key in groups and workload in costs:
            node = sharing.node(costs, workload, args.cores)
            link = Link(args.link_latency_us * 1e-6, args.link_gbytes * 1e9, latency_ms / 1000.0)
            pred = tokens / predict_job(job, node, link)
            formula = tokens / formula_job(job, node, link)
        kind = ("contention" if is_contention_run(key) else "oversubscribed" if is_oversubscription_run(key)
                else "wake" if is_wake_run(key) else rows[0]["kind"])
        out.append({"kind": kind, "workload": workload, "np": np_, "replicas": replicas,
                    "stages": np_ // replicas, "ubatch": ubatch, "wire": wire, "latency_ms": latency_ms,
                    "slots": slots, "runs": len(rows), "clean": int(key in groups), "measured_tok_per_s": measured,
                    "measured_min": min(float(r["tok_per_s"]) for r in rows),
                    "measured_max": max(float(r["tok_per_s"]) for r in rows),
                    "predicted_tok_per_s": pred, "error_pct": None if pred is None else 100 * (pred - measured) / measured,
                    "formula_tok_per_s": formula,
                    "formula_error_pct": None if formula is None else 100 * (formula - measured) / measured})
    kind_order = {"layout": 0, "contention": 0, "oversubscribed": 0, "wake": 0, "ubatch": 1, "wire": 2, "latency": 3, "calib": 4}
    out.sort(key=lambda o: (o["workload"] != "prefill", kind_order.get(o["kind"], 9), o["np"], -o["stages"],
                            o["ubatch"], o["wire"], o["latency_ms"], o["slots"]))
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=PREDICTED_COLUMNS)
            w.writeheader()
            for o in out:
                w.writerow({k: ("" if v is None else f"{v:.2f}" if isinstance(v, float) else v) for k, v in o.items()})
    print_table(out, args.tolerance_pct)
    if unclean:
        print(f"\n{len(unclean)} configurations measured only while other work used the machine (unclean: no "
              "prediction): " + "; ".join(describe_key(k) for k in sorted(unclean)))
    if unmeasured:
        print(f"\n{len(unmeasured)} configurations with no measurement (every run failed): "
              + "; ".join(describe_key(k) for k in sorted(unmeasured)))


def describe_key(key):
    workload, np_, replicas, ubatch, wire, latency_ms, slots = key
    return f"{workload} np {np_} = {replicas} x {np_ // replicas} ubatch {ubatch} {wire} {latency_ms:g} ms slots {slots}"


# The kinds of predict_sweep's rows that calibrate the model rather than test it.
CALIBRATION_KINDS = ("calib", "contention", "oversubscribed", "wake")


def print_table(out, tolerance):
    print("| workload | np | replicas x stages | ubatch | wire | hop ms | slots | measured tok/s (min-max) | "
          "model tok/s | error | closed form | error |")
    print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for o in out:
        measured = (f"{o['measured_tok_per_s']:.0f} ({o['measured_min']:.0f}-{o['measured_max']:.0f})"
                    + ("" if o["clean"] else " unclean"))
        if o["predicted_tok_per_s"] is None:
            print(f"| {o['workload']} | {o['np']} | {o['replicas']} x {o['stages']} | {o['ubatch']} | {o['wire']} | "
                  f"{o['latency_ms']:g} | {o['slots']} | {measured} | - | - | - | - |")
            continue
        flag = " (fit)" if o["kind"] in CALIBRATION_KINDS else "" if abs(o["error_pct"]) <= tolerance else " **"
        print(f"| {o['workload']} | {o['np']} | {o['replicas']} x {o['stages']} | {o['ubatch']} | {o['wire']} | "
              f"{o['latency_ms']:g} | {o['slots']} | {measured} | {o['predicted_tok_per_s']:.0f} | {o['error_pct']:+.1f}%{flag} | "
              f"{o['formula_tok_per_s']:.0f} | {o['formula_error_pct']:+.1f}% |")
    errs = [abs(o["error_pct"]) for o in out if o["kind"] not in CALIBRATION_KINDS and o["error_pct"] is not None]
    if errs:
        within = sum(e <= tolerance for e in errs)
        print(f"\nmodel vs measured over {len(errs)} predicted configurations (calibration runs, marked fit, excluded): "
              f"median |error| {statistics.median(errs):.1f}%, max {max(errs):.1f}%, "
              f"{within} within {tolerance:g}% (** marks the others)")


# ---------------------------------------------------------------------------------------------------
# bench_hop_latency.sh: 4 stages on 4 network-namespace hosts (TCP over veths, the same 2 cores), decode
# of 64 prompts x 64 tokens at --ubatch 512 (its default) with 4 or 32 slots, 0 or 1 ms injected a hop.

HOP_PROMPTS, HOP_TOKENS, HOP_UBATCH, HOP_STAGES = 64, 64, 512, 4
WINDOW_WORDS, WINDOW_STRIDE, N_WORDS = 8, 3, 36  # both scripts' prompts: 8 words from word 3j mod (36 - 8)


def hop_workload(decode):
    """bench_hop_latency.sh's prompts are sweep.sh's decode prompts continued: prompt j is the window at word
    3j mod 28, the window of decode prompt j mod 28 (3 is invertible mod 28), so it has its token count."""
    period = N_WORDS - WINDOW_WORDS
    if len(decode) < period:
        raise SystemExit(f"pipeline_model: hop: expected at least {period} decode prompts in the workloads, found {len(decode)}")
    if any(g != HOP_TOKENS for _, g in decode):
        raise SystemExit(f"pipeline_model: hop: expected every decode prompt to generate {HOP_TOKENS} tokens (as the "
                         f"benchmark's do), found {sorted(set(g for _, g in decode))}")
    return [decode[j % period] for j in range(HOP_PROMPTS)]


# Open MPI's shared-memory transport on this machine (machine-notes.md): 0.2 us, about 1 GB/s.
SHM_LATENCY_US, SHM_GBYTES = 0.2, 1.0


def predict_hop(args):
    shape = Shape.parse(args.shape)
    sweep = [r for r in read_csv(args.sweep) if r.get("clean", "1") == "1"]
    workloads = load_workloads(args.workloads)
    groups = defaultdict(list)
    for row in sweep:
        groups[config_key(row)].append(row)
    shm = Link(SHM_LATENCY_US * 1e-6, SHM_GBYTES * 1e9)  # the sweep ran over shared memory
    try:
        costs, sharing = calibrated_model(sweep, groups, read_csv(args.calibration), workloads, shape, args, shm)
    except Uncalibrated as e:
        raise SystemExit(f"pipeline_model hop: cannot calibrate on {args.sweep}: {e}")
    node = sharing.node(costs, "decode", args.cores)
    prompts = hop_workload(workloads["decode"])
    rates = defaultdict(list)
    chosen = defaultdict(list)  # --decode-groups auto's choice in each run, by (slots, hop ms)
    for row in read_csv(args.hop_csv):
        groups = row.get("decode_groups", "0")
        if groups == "auto":
            # "start>kept" when the run's measured trials kept another count: the model predicts the start
            chosen[(int(row["slots"]), float(row["latency_ms"]))].append(int(row["chosen_groups"].split(">")[0]))
        else:
            groups = int(groups) or HOP_STAGES  # 0: one a stage
        rates[(int(row["slots"]), groups, float(row["latency_ms"]))].append(float(row["generated_tok_per_s"]))
    tokens = sum(g for _, g in prompts)
    print(f"bench_hop_latency: {HOP_STAGES} stages over TCP ({args.link_latency_us:g} us, {args.link_gbytes:g} GB/s), "
          f"{args.cores:g} cores, ubatch {HOP_UBATCH}")
    print("| slots | decode groups | hop ms | measured tok/s (median of runs) | ratio to 0 ms | model tok/s | model ratio | error |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    pred = {}
    order = lambda item: (item[0][0], str(item[0][1]).zfill(4), item[0][2])  # auto after the counts
    for (slots, groups, lat), v in sorted(rates.items(), key=order):
        if groups == "auto":  # the count auto chose most often
            groups = statistics.mode(chosen[(slots, lat)])
        job = Job(shape, prompts, HOP_STAGES, 1, HOP_UBATCH, slots, decode_groups=groups)
        link = Link(args.link_latency_us * 1e-6, args.link_gbytes * 1e9, lat / 1000.0)
        pred[(slots, groups, lat)] = tokens / predict_job(job, node, link)
    for (slots, groups, lat), v in sorted(rates.items(), key=order):
        shown, model_groups = groups, groups
        if groups == "auto":
            model_groups = statistics.mode(chosen[(slots, lat)])
            shown = "auto: " + ", ".join(f"{g} x{n}" for g, n in sorted(Counter(chosen[(slots, lat)]).items()))
        m, base = statistics.median(v), statistics.median(rates.get((slots, groups, 0.0), [float("nan")]))
        p, pbase = pred[(slots, model_groups, lat)], pred.get((slots, model_groups, 0.0), float("nan"))
        print(f"| {slots} | {shown} | {lat:g} | {m:.0f} ({len(v)} runs) | {m / base:.3f} | {p:.0f} | "
              f"{p / pbase:.3f} | {100 * (p - m) / m:+.1f}% |")
    print_decode_group_choices(shape, prompts, node, args, rates, chosen)


def print_decode_group_choices(shape, prompts, node, args, rates, chosen):
    """For each (slots, hop) of the runs: the groups auto chose, the rule's choice on the model's step costs
    and hop, the simulation's fastest count of P..2P (auto's range), and the measured fastest count."""
    P, tokens = HOP_STAGES, sum(g for _, g in prompts)
    split = partition_by_bytes(shape, P)
    fwd = WIRE_BYTES_PER_TOKEN["f32"](shape.n_embd)
    context = statistics.mean(p + g / 2 for p, g in prompts)  # a decode row's, over its sequence's life
    # glacier times every stage's step with all stages computing at once, so on this host's cores each
    # gets its share, slowed by the sharing (Node.contention, Node.oversubscribed).
    share = min(1.0, node.cores / P) * node.contention * (node.oversubscribed if P > node.cores else 1.0)
    print()
    print(f"--decode-groups auto: its choice in the runs, the same rule on the model's step costs, the simulation's "
          f"fastest of {P}..{2 * P} groups (auto's range) and the measured fastest count (median tok/s)")
    print("| slots | hop ms | auto chose (runs) | rule on the model's costs | simulation's fastest | measured fastest |")
    print("|---:|---:|---|---:|---:|---|")
    for slots, lat in sorted({(s, l) for s, _, l in rates}):
        job = Job(shape, prompts, P, 1, HOP_UBATCH, slots)
        link = Link(args.link_latency_us * 1e-6, args.link_gbytes * 1e9, lat / 1000.0)
        step_s = [lambda b, st=st: sum(stage_costs(job, node, split, st, MicroBatch(0, b, b, round(b * context)))) / share
                  for st in range(P)]
        largest = -(-slots // P)
        hop_s = link.latency_s + link.inject_s + largest * fwd / link.bandwidth_Bps
        rule, _ = choose_decode_groups(P, slots, 2 * P, hop_s, step_s)
        simulated = {g: tokens / predict_job(Job(shape, prompts, P, 1, HOP_UBATCH, slots, decode_groups=g), node, link)
                     for g in range(P, min(slots, 2 * P) + 1)}
        fastest = max(simulated, key=simulated.get)
        measured = {g: statistics.median(v) for (s, g, l), v in rates.items() if (s, l) == (slots, lat) and g != "auto"}
        best = max(measured, key=measured.get) if measured else None
        auto = ", ".join(f"{g} x{n}" for g, n in sorted(Counter(chosen.get((slots, lat), [])).items())) or "-"
        print(f"| {slots} | {lat:g} | {auto} | {rule} | {fastest} ({simulated[fastest]:.0f} tok/s) | "
              + (f"{best} ({measured[best]:.0f} tok/s)" if best is not None else "-") + " |")


# ---------------------------------------------------------------------------------------------------
# Clusters beyond this machine: one rank a node with all its cores, compute from stated node figures.

NETWORKS = {  # one-way small-message latency and payload bandwidth, as MPI sees them
    "1 GbE": Link(50e-6, 0.117e9),        # TCP through the kernel; 0.94 Gbit/s of payload
    "25 GbE": Link(15e-6, 2.9e9),         # TCP; about 23 Gbit/s of payload
    "InfiniBand": Link(2e-6, 23e9),       # HDR 200 Gbit/s through UCX verbs
}
LLAMA_70B = Shape(n_embd=8192, n_layer=80, n_head=64, n_head_kv=8, n_ff=28672, n_vocab=128256, type="q4_k")


def node_tau(mem_bw, int8_ops, bytes_per_weight):
    """Seconds a weight byte over n rows on a whole node: streaming the weights once (memory bandwidth)
    or the arithmetic (2 int8 operations a weight and row), whichever is longer."""
    return lambda n: 0.0 if n <= 0 else max(1.0 / mem_bw, n * 2.0 / (bytes_per_weight * int8_ops))


def node_tau_additive(mem_bw, int8_ops, bytes_per_weight):
    """node_tau's two figures added instead of overlapped: streaming the weights, then the arithmetic. The
    float GEMMs (F16, BF16) behave so: one thread's BF16 GEMM on the Zen 5 VM took 37, 68 and 2680 ps a
    weight byte at 1, 8 and 512 rows (RESULTS, Kernels), which a + n b fits within 15% and max(a, n b)
    misses by 40% at 8 rows; the int8 GEMMs' tau is flat to about 8 rows and rises after (node_tau)."""
    return lambda n: 0.0 if n <= 0 else 1.0 / mem_bw + n * 2.0 / (bytes_per_weight * int8_ops)


TAU_FORMS = {"max": node_tau, "sum": node_tau_additive}


def cluster(args):
    shape = LLAMA_70B
    bpw = BYTES_PER_WEIGHT[shape.type]
    total = shape.n_layer * shape.layer_bytes() + 2 * shape.head_bytes()  # + the embedding, same size
    # Decode rows stream their K and V (f32) from memory as the weights are.
    node = Node(node_tau(args.mem_gbytes * 1e9, args.int8_tops * 1e12, bpw), cores=1.0, kv_tau=1.0 / (args.mem_gbytes * 1e9))
    prefill = [(args.prefill_tokens, 1)] * args.prefill_prompts
    decode = [(args.decode_prompt_tokens, args.decode_new_tokens)] * args.decode_prompts
    decode_ctx = args.decode_prompt_tokens + args.decode_new_tokens // 2  # the average context of a decode row
    print(f"Llama-70B shape (80 layers, n_embd 8192, n_ff 28672, GQA 8 KV heads, vocab 128256) in Q4_K: "
          f"{total / 1e9:.1f} GB of weights ({bpw * 8:.2f} bits a weight)")
    print(f"node: {args.mem_gbytes:g} GB/s memory bandwidth for weight streaming, {args.int8_tops:g} int8 TOP/s "
          f"for products; one rank a node; decode rows also read their K and V (f32) at every earlier position")
    print(f"prefill: {args.prefill_prompts} prompts x {args.prefill_tokens} tokens, 1 new token, ubatch "
          f"{args.ubatch}; decode: {args.decode_prompts} prompts of {args.decode_prompt_tokens} tokens x "
          f"{args.decode_new_tokens} new, {args.slots} slots a pipeline; decode groups = stages")
    print("networks: " + "; ".join(f"{n}: {l.latency_s * 1e6:g} us, {l.bandwidth_Bps / 1e9:g} GB/s"
                                  for n, l in NETWORKS.items()))
    print()
    names = list(NETWORKS)
    print("| nodes | layout | wire | " + " | ".join(f"prefill tok/s, {n}" for n in names) + " | "
          + " | ".join(f"decode tok/s, {n}" for n in names) + " | decode hop / stage, 1 GbE |")
    print("|---:|---|---|" + "---:|" * (2 * len(names) + 1))
    for nodes in args.nodes:
        layouts = [(1, nodes)] + ([(nodes, 1)] if args.replicas_row else [])
        for replicas, stages in layouts:
            split = partition_by_bytes(shape, stages)
            for wire in (("f32", "int8") if stages > 1 else ("-",)):
                w = "f32" if wire == "-" else wire
                pj = Job(shape, prefill, nodes, replicas, args.ubatch, args.slots, w)
                dj = Job(shape, decode, nodes, replicas, args.ubatch, args.slots, w)
                hosts = lambda r, s, P=stages: r * P + s  # one rank a node
                p_rates, d_rates = [], []
                for net in names:
                    link = NETWORKS[net] if stages > 1 else Link(0.0, 1e30)  # replicas: no hops
                    p_rates.append(sum(p for p, _ in prefill) / predict_job(pj, node, link, hosts))
                    d_rates.append(sum(g for _, g in decode) / predict_job(dj, node, link, hosts))
                b = max(1, args.slots // stages)  # a decode group's rows
                t = max(sum(stage_costs(dj, node, split, s, MicroBatch(0, b, b, b * decode_ctx))) for s in range(stages))
                gbe = NETWORKS["1 GbE"]
                h = gbe.latency_s + b * WIRE_BYTES_PER_TOKEN[w](shape.n_embd) / gbe.bandwidth_Bps
                layout = f"{replicas} x {stages}" + (" (replicas)" if replicas > 1 else "")
                print(f"| {nodes} | {layout} | {wire} | " + " | ".join(f"{r:.0f}" for r in p_rates) + " | "
                      + " | ".join(f"{r:.0f}" for r in d_rates) + " | "
                      + (f"{h / t:.3f}" if stages > 1 else "-") + " |")


# ---------------------------------------------------------------------------------------------------
# Expert parallelism (--expert-parallel E; src/compute/expert_group.h, src/pipeline/expert_group_channel.cpp,
# src/compute/moe_ffn.cpp). The ranks of a stage form a group: member j holds the routed experts e with
# e % E == j of the stage's MoE layers; attention, the router, the shared experts and dense layers are held
# by every member and computed by every member (the shared experts, in a split micro-batch, for the
# member's share of the tokens only), the embedding and the head by the leader (the member on the ring). A
# micro-batch: the leader hands its layer input to the E - 1 members (an f32 forward message each, and
# waits for the sends to leave); every member runs the stage's layers, and at each MoE layer sends the
# outputs of the (token, chosen expert) slots it computed, n_embd floats a slot, either (split) to the
# member that finishes each token (member j finishes tokens [j n / E, (j + 1) n / E)), which sums them,
# then every member sends its finished rows to every other member; or (a small micro-batch) to every other
# member. So a layer lasts as long as its most loaded member plus the exchange: for one token,
# k of X experts over E members load the busiest member with more than k / E of them (4 of 16 over 2:
# 2.65 on average), and the routed experts' time is that member's, not k / E of the whole. The ring's
# layout is the one without expert groups (the same byte-balanced split over P stages).
#
# An expert group is simulated as one rank of the ring (its hosts: the members'), whose micro-batch costs
# the replicated compute, the busiest member's routed experts (computing on all E members' cores), then
# a wait: the hand-off, the exchanges' link time and the polls that see them (Monte Carlo over routings,
# expert_group_time). The members' lock-step at every MoE layer is what makes this exact enough: their
# replicated work is the same, so how they drift apart depends on the routing and the links only.

@dataclass
class MoeShape(ModelDims):
    """A mixture-of-experts model. n_ff: the feed-forward width of its n_dense_lead leading dense layers;
    n_ff_shexp: the summed width of a MoE layer's shared experts (0: none); head_dim 0: n_embd / n_head;
    attn_bytes 0: q, k, v and o from the heads (latent attention's tensors differ: give their bytes);
    kv_lora_rank and rope_dim: a latent KV cache (Shape's fields). The router is kept f32 (as llama.cpp's
    converter and quantizer keep ffn_gate_inp)."""
    n_expert: int
    n_expert_used: int
    n_ff_expert: int
    n_ff_shexp: int = 0
    n_dense_lead: int = 0
    head_dim: int = 0
    attn_bytes: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    # From a GGUF file (moe_shape_from_gguf): its tensors' bytes, which tensors() then returns, the bytes a
    # weight of its matrices (their types may differ) and its path.
    file_tensors: tuple = ()
    file_bpw: float = 0.0
    source: str = ""

    REQUIRED = ("n_embd", "n_layer", "n_head", "n_head_kv", "n_ff", "n_vocab", "type", "n_expert", "n_expert_used",
                "n_ff_expert")
    OPTIONAL = ("n_ff_shexp", "n_dense_lead", "head_dim", "attn_bytes", "kv_lora_rank", "rope_dim")

    @staticmethod
    def parse(text):
        """A preset's name (MOE_PRESETS) or 'n_embd=... type=T n_expert=X n_expert_used=K n_ff_expert=F
        [n_ff_shexp=S n_dense_lead=D head_dim=H attn_bytes=B kv_lora_rank=R rope_dim=D]'."""
        if text in MOE_PRESETS:
            return MOE_PRESETS[text]
        try:
            kv = dict(item.split("=", 1) for item in text.split())
        except ValueError:
            raise SystemExit(f"pipeline_model: --shape: expected one of {sorted(MOE_PRESETS)} or key=value pairs, found '{text}'")
        want, optional = MoeShape.REQUIRED, MoeShape.OPTIONAL
        check_shape_keys(kv, want, optional, f" (or one of {sorted(MOE_PRESETS)})")
        ints = {}
        for k in want + optional:
            if k in kv and k != "type":
                try:
                    ints[k] = int(kv[k])
                except ValueError:
                    raise SystemExit(f"pipeline_model: --shape {k}: expected an integer, found '{kv[k]}'")
        moe = MoeShape(type=kv["type"], **ints)
        if not 1 <= moe.n_expert_used <= moe.n_expert:
            raise SystemExit(f"pipeline_model: --shape n_expert_used: expected 1..n_expert ({moe.n_expert}), found {moe.n_expert_used}")
        if not 0 <= moe.n_dense_lead < moe.n_layer:
            raise SystemExit(f"pipeline_model: --shape n_dense_lead: expected 0..n_layer - 1, found {moe.n_dense_lead}")
        if ("kv_lora_rank" in kv) != ("rope_dim" in kv):
            raise SystemExit("pipeline_model: --shape: expected kv_lora_rank= and rope_dim= together (a latent KV cache)")
        return moe

    @property
    def bpw(self):
        return self.file_bpw or BYTES_PER_WEIGHT[self.type]

    @property
    def hd(self):
        return self.head_dim or self.n_embd // self.n_head

    @property
    def n_moe_layers(self):
        return self.n_layer - self.n_dense_lead

    def tensors(self):
        """[(layer or None, name, bytes)]: the matrices of the file (norms and biases, a few KB, left out),
        each named as the GGUF names it; what expert parallelism does with each follows from its name."""
        if self.file_tensors:
            return list(self.file_tensors)
        e, bpw, hd = self.n_embd, self.bpw, self.hd
        out = [(None, "token_embd", self.n_vocab * e * bpw)]
        for l in range(self.n_layer):
            if self.attn_bytes:
                out.append((l, "attn (latent, as given)", self.attn_bytes))
            else:
                out += [(l, "attn_q", e * self.n_head * hd * bpw), (l, "attn_k", e * self.n_head_kv * hd * bpw),
                        (l, "attn_v", e * self.n_head_kv * hd * bpw), (l, "attn_output", self.n_head * hd * e * bpw)]
            if l < self.n_dense_lead:
                out += [(l, f"ffn_{m}", e * self.n_ff * bpw) for m in ("gate", "up", "down")]
                continue
            out.append((l, "ffn_gate_inp", e * self.n_expert * BYTES_PER_WEIGHT["f32"]))
            if self.n_ff_shexp:
                out += [(l, f"ffn_{m}_shexp", e * self.n_ff_shexp * bpw) for m in ("gate", "up", "down")]
            out += [(l, f"ffn_{m}_exps", e * self.n_ff_expert * self.n_expert * bpw) for m in ("gate", "up", "down")]
        out.append((None, "output", self.n_vocab * e * bpw))
        return out

    def layer_split_bytes(self):
        """Per layer: (replicated bytes, routed-expert bytes) from tensors()."""
        rep, exp = [0.0] * self.n_layer, [0.0] * self.n_layer
        for layer, name, b in self.tensors():
            if layer is None:
                continue
            if is_routed_expert(name):
                exp[layer] += b
            else:
                rep[layer] += b
        return rep, exp

    def expert_bytes_each(self):
        if self.file_tensors:
            return self.layer_split_bytes()[1][self.n_dense_lead] / self.n_expert
        return 3 * self.n_embd * self.n_ff_expert * self.bpw

    def embed_bytes(self):
        """What the first stage's leader holds beyond its layers."""
        if self.file_tensors:
            return sum(b for l, name, b in self.file_tensors if name == "token_embd.weight")
        return self.n_vocab * self.n_embd * self.bpw

    def head_bytes(self):
        """What the last stage's leader holds beyond its layers: the output matrix (the embedding's when the
        file ties them) and, from a file, the other tensors of no layer (the output norm)."""
        if self.file_tensors:
            ends = [(name, b) for l, name, b in self.file_tensors if l is None and name != "token_embd.weight"]
            tied = not any(name == "output.weight" for name, _ in ends)
            return sum(b for _, b in ends) + (self.embed_bytes() if tied else 0.0)
        return self.n_vocab * self.n_embd * self.bpw

    def kv_bytes_per_position(self):
        if self.kv_lora_rank:
            return (self.kv_lora_rank + self.rope_dim) * 4
        return 2 * self.n_head_kv * self.hd * 4

    def describe(self):
        total = sum(b for *_, b in self.tensors())
        rep, exp = self.layer_split_bytes()
        return ((f"{self.source}: " if self.source else "")
                + f"{self.n_layer} layers ({self.n_dense_lead} dense), n_embd {self.n_embd}, {self.n_expert} experts "
                f"({self.n_expert_used} a token) of width {self.n_ff_expert}"
                + (f", shared experts of width {self.n_ff_shexp}" if self.n_ff_shexp else "")
                + f", vocab {self.n_vocab}, " + (f"{self.bpw:.3f} bytes a weight" if self.file_tensors else self.type)
                + f": {total / 1e9:.3f} GB of " + ("tensors" if self.file_tensors else "matrices")
                + f", routed experts {sum(exp) / 1e9:.3f} GB, attention + router + shared + dense {sum(rep) / 1e9:.3f} GB, "
                f"embedding and head {(self.embed_bytes() + self.head_bytes()) / 1e9:.3f} GB")


MOE_PRESETS = {
    # benchmarks/RESULTS.md's model (glacier_mkmodel --arch deepseek2 --n-embd 1024 --n-layer 16 --n-expert 16
    # --n-expert-used 4 --n-ff-expert 704 --n-vocab 32000 --type bf16): the tiny preset's 4 heads and n_ff
    # 128 (the dense layer), mkmodel's latent attention (q_lora 32: q_a 1024 x 32, q_b 32 x 4 x 48; kv_a
    # 1024 x 48, kv_b 32 x 4 x 64, o 4 x 32 x 1024 = 227328 weights), 1 shared expert, 1 leading dense layer.
    "deepseek2-synthetic": MoeShape(n_embd=1024, n_layer=16, n_head=4, n_head_kv=4, n_ff=128, n_vocab=32000, type="bf16",
                                    n_expert=16, n_expert_used=4, n_ff_expert=704, n_ff_shexp=704, n_dense_lead=1,
                                    attn_bytes=227328 * 2, kv_lora_rank=32, rope_dim=16),
    # Qwen3-235B-A22B's shape (config.json): 94 layers, all MoE, 128 experts of width 1536, 8 a token, no
    # shared expert; 64 query heads and 4 KV heads of 128; vocab 151936. Q4_K throughout (a Q4_K_M file
    # keeps some tensors at Q6_K: a few percent more).
    "qwen3-moe-235b": MoeShape(n_embd=4096, n_layer=94, n_head=64, n_head_kv=4, n_ff=0, n_vocab=151936, type="q4_k",
                               n_expert=128, n_expert_used=8, n_ff_expert=1536, head_dim=128),
}


# ggml tensor types: (weights a block, bytes a block), by the type id a GGUF tensor info carries.
GGML_TYPE_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
                    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18),
                    23: (256, 136), 30: (1, 2)}
GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_header(path):
    """(metadata {key: value}, [(name, dims, type id)], bytes before the tensor data): a GGUF file's header
    (arrays other than of scalars are skipped)."""
    import struct

    with open(path, "rb") as f:
        def take(fmt):
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) < size:
                raise SystemExit(f"pipeline_model: --gguf: {path} ends inside its header")
            return struct.unpack(fmt, data)[0]

        def string():
            return f.read(take("<Q")).decode("utf-8", "replace")

        def value(t):
            if t in GGUF_SCALARS:
                return take(GGUF_SCALARS[t])
            if t == 8:
                return string()
            if t == 9:
                item, n = take("<I"), take("<Q")
                items = [value(item) for _ in range(n)]
                return items if item in GGUF_SCALARS else None
            raise SystemExit(f"pipeline_model: --gguf: {path}: unknown metadata type {t}")

        if f.read(4) != b"GGUF":
            raise SystemExit(f"pipeline_model: --gguf: expected a GGUF file, {path} does not start with GGUF")
        version = take("<I")
        if version < 2:
            raise SystemExit(f"pipeline_model: --gguf: expected GGUF version 2 or 3, {path} is version {version}")
        n_tensors, n_kv = take("<Q"), take("<Q")
        meta = {}
        for _ in range(n_kv):
            key = string()
            meta[key] = value(take("<I"))
        tensors = []
        for _ in range(n_tensors):
            name = string()
            dims = [take("<Q") for _ in range(take("<I"))]
            tensors.append((name, dims, take("<I")))
            take("<Q")  # offset
        align = meta.get("general.alignment", 32)
        return meta, tensors, -(-f.tell() // align) * align


def moe_shape_from_gguf(path):
    """A MoeShape whose bytes are the file's tensors' (every tensor; blk.N.* is layer N's, the rest the
    embedding's and head's), whose shape fields come from its metadata."""
    meta, tensors, _ = read_gguf_header(path)
    arch = meta.get("general.architecture", "")
    get = lambda key, default=None: meta.get(f"{arch}.{key}", default)
    if not get("expert_count"):
        raise SystemExit(f"pipeline_model: --gguf: expected a mixture-of-experts model ({arch}.expert_count), {path} has none")
    file_tensors, n_weights, n_bytes = [], 0, 0
    for name, dims, t in tensors:
        if t not in GGML_TYPE_BLOCKS:
            raise SystemExit(f"pipeline_model: --gguf: {path}: tensor {name} has ggml type {t}, which this model's "
                             f"table ({sorted(GGML_TYPE_BLOCKS)}) does not size")
        block, block_bytes = GGML_TYPE_BLOCKS[t]
        count = math.prod(dims)
        b = count // block * block_bytes
        layer = int(name.split(".")[1]) if name.startswith("blk.") else None
        file_tensors.append((layer, name, b))
        if len(dims) >= 2:
            n_weights, n_bytes = n_weights + count, n_bytes + b
    n_layer = get("block_count")
    moe_layers = sorted({l for l, name, _ in file_tensors if l is not None and is_routed_expert(name)})
    dense_lead = moe_layers[0] if moe_layers else n_layer
    if moe_layers != list(range(dense_lead, n_layer)):
        raise SystemExit(f"pipeline_model: --gguf: expected the MoE layers after the dense ones, {path} has MoE layers {moe_layers}")
    n_embd, n_head = get("embedding_length"), get("attention.head_count")
    n_head_kv = get("attention.head_count_kv", n_head)
    n_head_kv = max(n_head_kv) if isinstance(n_head_kv, list) else n_head_kv
    embd = next((dims for name, dims, _ in tensors if name == "token_embd.weight"), None)
    return MoeShape(n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_head_kv=n_head_kv,
                    n_ff=get("feed_forward_length", 0), n_vocab=embd[1] if embd else 0, type="f32",
                    n_expert=get("expert_count"), n_expert_used=get("expert_used_count"),
                    n_ff_expert=get("expert_feed_forward_length", get("feed_forward_length", 0)),
                    n_dense_lead=dense_lead, head_dim=get("attention.key_length", 0),
                    kv_lora_rank=get("attention.kv_lora_rank", 0),
                    rope_dim=get("rope.dimension_count", 0) if get("attention.kv_lora_rank") else 0,
                    file_tensors=tuple(file_tensors), file_bpw=n_bytes / n_weights, source=path)


def is_routed_expert(name):
    """blk.N.ffn_{gate,up,down}_exps (stacked) or blk.N.ffn_{gate,up,down}.E.weight (one tensor an expert)."""
    parts = name.split(".")
    return "_exps" in name or (len(parts) == 5 and parts[2] in ("ffn_gate", "ffn_up", "ffn_down") and parts[3].isdigit())


def moe_split(moe, n_stages):
    rep, exp = moe.layer_split_bytes()
    return partition_layers([a + b for a, b in zip(rep, exp)], moe.head_bytes(), n_stages)


def layouts(n_ranks, moe):
    """Every P x E = n_ranks glacier accepts: E divides the experts and P stages have a layer each."""
    return [(n_ranks // e, e) for e in range(1, n_ranks + 1)
            if n_ranks % e == 0 and moe.n_expert % e == 0 and n_ranks // e <= moe.n_layer]


def rank_weight_bytes(moe, P, E):
    """[(stage, member, bytes of weights it holds)], world ranks in glacier's order (member j of stage s
    is world rank j * P + s): every member its stage's replicated bytes and 1/E of its routed experts,
    the leaders of the first and last stages the embedding and the head."""
    rep, exp = moe.layer_split_bytes()
    split = moe_split(moe, P)
    out = []
    for j in range(E):
        for s, (a, b) in enumerate(split):
            held = sum(rep[a:b]) + sum(exp[a:b]) / E
            if j == 0:
                held += (moe.embed_bytes() if s == 0 else 0.0) + (moe.head_bytes() if s == P - 1 else 0.0)
            out.append((s, j, held))
    return out


def kv_bytes_of_stage(moe, P, s, slots, ctx):
    a, b = moe_split(moe, P)[s]
    return slots * ctx * (b - a) * moe.kv_bytes_per_position()


# Routings drawn a micro-batch size: the busiest member's expected load (and the exchange it implies) is a
# mean over them. Every layout is priced on the same draws (the same seed a size), so the layouts differ
# by their split of the experts, not by the draws; 48 puts the mean of a 16-layer stage's busiest loads
# within about 1% (its standard error at one token, 4 of 16 experts over 2 members).
EP_ROUTING_SAMPLES = 48
# Up to these rows each token draws its k distinct experts; above, the n k slots are drawn independently
# (multinomial: at a few slots an expert, the k-of-a-token constraint no longer changes the loads).
EXACT_ROUTING_UPTO = 64


class ExpertRouting:
    """Rows each routed expert gets in each MoE layer, per sample, for a micro-batch of n tokens routed
    uniformly at random (a trained router is balanced by its training loss, a synthetic one by chance)."""

    def __init__(self, moe, samples=EP_ROUTING_SAMPLES):
        self.moe, self.samples, self.cache = moe, samples, {}

    def loads(self, n):
        if n not in self.cache:
            m, S = self.moe, self.samples
            rng = np.random.default_rng(1000003 + n)
            X, k, L = m.n_expert, m.n_expert_used, m.n_moe_layers
            if k == X:  # every token takes every expert
                out = np.full((S, L, X), n, dtype=np.int64)
            elif n <= EXACT_ROUTING_UPTO:
                out = np.empty((S, L, X), dtype=np.int64)
                for l in range(L):
                    chosen = np.argpartition(rng.random((S, n, X)), k - 1, axis=2)[:, :, :k]  # k distinct a token
                    flat = (chosen + X * np.arange(S)[:, None, None]).ravel()
                    out[:, l, :] = np.bincount(flat, minlength=S * X).reshape(S, X)
            else:
                out = rng.multinomial(n * k, np.full(X, 1.0 / X), size=(S, L)).astype(np.int64)
            self.cache[n] = out
        return self.cache[n]


POLL_OFFSETS_NP = np.asarray(POLL_OFFSETS)


def first_poll_vec(since, when):
    """first_poll over arrays (when -inf: nothing to wait for, seen at once)."""
    d = when - since
    j = np.minimum(np.searchsorted(POLL_OFFSETS_NP, d), len(POLL_OFFSETS_NP) - 1)
    return np.where(d <= POLL_OFFSETS_NP[0], when, since + POLL_OFFSETS_NP[j])


def poll_gap(waited):
    """The gap between a wait's polls once it has waited this long (its polls see a message half a gap
    late on average)."""
    if waited <= POLL_OFFSETS[0]:
        return 0.0
    j = bisect.bisect_left(POLL_OFFSETS, waited)
    if j >= len(POLL_OFFSETS):
        return POLL_MAX_US * 1e-6 + POLL_OVERSHOOT_S
    return POLL_OFFSETS[j] - POLL_OFFSETS[j - 1]


# src/compute/moe_ffn.cpp's rule: an expert group splits the finishing of a micro-batch's tokens when every
# member gets one and that saves a member at least this many rows of expert outputs (the split's second
# round costs a message).
EP_MIN_ROWS_SAVED_TO_SPLIT = 4.0


def ep_splits_tokens(moe, E, n):
    k = moe.n_expert_used
    return n >= E and n * (E - 1) / E * (k - k / E - 1) >= EP_MIN_ROWS_SAVED_TO_SPLIT


# src/compute/transformer_stage.cpp's rule (TransformerStage::plan_sequence_split): an expert group splits a
# micro-batch by sequence when every member gets at least this many tokens.
EP_MIN_TOKENS_A_MEMBER_TO_SPLIT_LAYERS = 2


def ep_member_tokens(E, chunks):
    """The tokens each member of an expert group of E runs when it splits a micro-batch of these chunks (one
    a sequence) by sequence, largest chunk first to the member with the fewest so far; None when it does not
    split it (fewer sequences than members, or a member below EP_MIN_TOKENS_A_MEMBER_TO_SPLIT_LAYERS)."""
    if E < 2 or len(chunks) < E or sum(chunks) < E * EP_MIN_TOKENS_A_MEMBER_TO_SPLIT_LAYERS:
        return None
    loads = [0] * E
    for c in sorted(chunks, reverse=True):
        loads[loads.index(min(loads))] += c
    return loads if min(loads) >= EP_MIN_TOKENS_A_MEMBER_TO_SPLIT_LAYERS else None


def expert_group_time(moe, routing, tau, moe_layers, E, n, link, input_lag, split_layers=False, dense_layers=0):
    """(seconds of routed-expert compute, seconds of waiting) one micro-batch of n tokens adds to a stage's
    replicated compute, means over the routing samples. moe_layers: the stage's MoE layers (0 = the first
    MoE layer); dense_layers: how many it has besides. split_layers: the group splits the micro-batch by
    sequence (ep_member_tokens), so the replicated compute is each member's share of it, each MoE layer's
    second exchange carries a member's keys and values (and its MoE inputs) instead of its finished rows,
    each dense layer adds an exchange of the keys and values, and the leader gathers the rows at the end. The busiest member's experts are compute (all members' cores work); the rest is waiting:
    the leader's hand-off (E - 1 forward messages sent one after another, then it starts), the members
    seeing it (input_lag late: they poll), and at each MoE layer two exchanges when the group splits the
    tokens (ep_splits_tokens): the all-to-all (member i sends each other member the outputs of that
    member's tokens among its slots, in member order, each taking latency + position x bytes / bandwidth to
    arrive) and the all-gather of the finished rows (n / E tokens a member, to every other); one when it
    does not (every member's slots' outputs to every other). Member j waits for each other member's
    message in turn (its wait polls, restarting at each message), then for its own sends to have left.
    The replicated compute drops out: every member does the same (the shared experts, which a split gives
    each member for its n / E tokens only, are counted with it, so such a model is priced a little slow)."""
    if n <= 0:
        return 0.0, 0.0
    fwd = HEADER_BYTES_PER_MB + n * moe.n_embd * 4.0                         # the hand-off is always f32
    per_msg = fwd / link.bandwidth_Bps
    # Under a split by sequence: each member's keys and values to every other, once a dense layer (the
    # members' shares roughly even: n / E tokens a member), and at the end the rows to the leader.
    kv_share = n / E * moe.kv_bytes_per_position()
    split_extra = 0.0
    if split_layers:
        split_extra = (dense_layers * (link.latency_s + (E - 1) * kv_share / link.bandwidth_Bps)
                       + link.latency_s + (E - 1) * n / E * moe.n_embd * 4.0 / link.bandwidth_Bps)
    if not moe_layers:  # a stage of dense layers only: the members follow, nothing to gather
        return 0.0, (E - 1) * per_msg + split_extra
    X, S = moe.n_expert, routing.samples
    loads = routing.loads(n)[:, moe_layers, :]                               # (S, layers, X)
    table = np.asarray([0.0] + [tau(m) for m in range(1, int(loads.max()) + 1)]) * moe.expert_bytes_each()
    per_member = table[loads].reshape(S, len(moe_layers), X // E, E).sum(axis=2)  # expert e on member e % E
    busiest = float(per_member.max(axis=2).sum(axis=1).mean())
    if E == 1:
        return busiest, 0.0
    slots = loads.reshape(S, len(moe_layers), X // E, E).sum(axis=2)
    # Split (as MoeFfn::splits_tokens decides): member i sends member j the outputs of j's tokens among its
    # slots, 1 / E of them (j finishes n / E of the tokens; f32, n_embd floats a slot), then every member
    # sends its n / E finished rows to each. Not split: every member sends all its slots' outputs to each.
    split = split_layers or ep_splits_tokens(moe, E, n)
    part_bytes = slots * moe.n_embd * 4.0 / (E if split else 1)
    rows_bytes = np.full((S, E), n / E * moe.n_embd * 4.0 + (kv_share if split_layers else 0.0))
    start = np.zeros((S, E))
    start[:, 0] = (E - 1) * per_msg                                          # the leader waits for its sends
    for j in range(1, E):
        start[:, j] = link.latency_s + j * per_msg + input_lag
    member = np.arange(E)

    def exchange(sent, msg_bytes, nonempty):
        """When each member holds everything the others send it, every member i sending msg_bytes[:, i]
        to each other member in member order from sent[:, i]: j waits for the members in order (its wait
        polls, restarting at each message), then for its own sends to have left."""
        ready = sent.copy()
        for i in range(E):
            pos = np.where(member < i, member + 1, member)                   # j's place among i's sends
            arrive = sent[:, i:i + 1] + link.latency_s + pos[None, :] * msg_bytes[:, i:i + 1] / link.bandwidth_Bps
            arrive = np.where((member[None, :] != i) & nonempty[:, i:i + 1], arrive, -np.inf)
            ready = np.maximum(ready, first_poll_vec(ready, arrive))
        return np.maximum(ready, sent + (E - 1) * msg_bytes / link.bandwidth_Bps)

    for li in range(len(moe_layers)):
        finish = start + per_member[:, li, :]
        summed = exchange(finish, part_bytes[:, li, :], slots[:, li, :] > 0)  # the all-to-all (or all-gather)
        start = exchange(summed, rows_bytes, rows_bytes > 0) if split else summed  # the finished rows
    total = float(start[:, 0].mean()) + split_extra
    return busiest, max(0.0, total - busiest)


@dataclass
class ExpertLayout:
    """One P x E layout of a MoE model on a node and link: its micro-batch costs (expert_parallel_work)."""
    moe: MoeShape
    P: int
    E: int
    node: Node
    link: Link                # the ring's
    routing: ExpertRouting
    group_link: Link = None   # the hand-off's and the exchanges' (default: the ring's)
    split: list = None
    cache: dict = field(default_factory=dict)

    def __post_init__(self):
        self.split = self.split or moe_split(self.moe, self.P)
        self.group_link = self.group_link or self.link
        self.rep, _ = self.moe.layer_split_bytes()

    def costs(self, s, mb, idle):
        """(compute on all members, waiting, the leader's head compute) of micro-batch mb on stage s, whose
        members have been idle `idle` seconds (they see the hand-off input_lag late: half a poll gap)."""
        a, b = self.split[s]
        tau = self.node.tau
        # Split by sequence, the busiest member's share of the tokens and of the keys they read.
        shares = ep_member_tokens(self.E, mb.chunks)
        rows = max(shares) if shares else mb.tokens
        rep = (sum(self.rep[a:b]) * tau(rows)
               + (b - a) * mb.decode_keys * rows / mb.tokens * self.moe.kv_bytes_per_position() * self.node.kv_tau)
        lag = round(0.5 * poll_gap(idle) * 1e5) / 1e5 if self.E > 1 else 0.0  # to 10 us: a few sizes to cache
        key = (s, mb.tokens, lag, shares is not None)
        if key not in self.cache:
            moe_layers = [l - self.moe.n_dense_lead for l in range(a, b) if l >= self.moe.n_dense_lead]
            self.cache[key] = expert_group_time(self.moe, self.routing, tau, moe_layers, self.E, mb.tokens,
                                                self.group_link, lag, shares is not None, (b - a) - len(moe_layers))
        experts, wait = self.cache[key]
        head = 0.0
        if s == self.P - 1 and mb.logits > 0:
            head = self.moe.head_bytes() * (self.node.head_tau or tau)(mb.logits)
        return rep + experts, wait, head


def expert_parallel_work(layout):
    """work(stage, mb) for make_replica_programs: an expert group's micro-batch."""
    last_done = defaultdict(lambda: -math.inf)  # when each stage's group last finished its layers

    def work(s, mb):
        now = yield ("now",)
        compute, wait, head = layout.costs(s, mb, now - last_done[s])
        yield ("compute", [compute], layout.E)
        if wait > 0:
            yield ("sleep", wait)
        last_done[s] = yield ("now",)
        if head > 0:
            yield ("compute", [head], 1)  # the leader alone
    return work


def predict_expert_job(layout, prompts, slots, ubatch, hosts, cores_by_host, decode_groups=0):
    """Seconds one pipeline of P expert groups takes on prompts (the driver on stage 0's leader).
    hosts(s, j): the host of member j of stage s."""
    P, E = layout.P, layout.E
    opts = scheduler_options(P, decode_groups)
    actions = replay_scheduler(prompts, slots, ubatch, opts["max_in_flight"], opts["decode_groups"])
    mbs = [a[1] for a in actions if a[0] == "submit"]
    job = Job(None, prompts, P, 1, ubatch, slots, "f32", layout.split, decode_groups)
    fwd = WIRE_BYTES_PER_TOKEN["f32"](layout.moe.n_embd)
    programs = make_replica_programs(job, layout.node, layout.split, 0, actions, mbs, fwd, 0.0, layout.link,
                                     work=expert_parallel_work(layout))
    rank_hosts = [tuple(hosts(s, j) for j in range(E)) for s in range(P)]
    _, done = simulate(programs, rank_hosts, cores_by_host, layout.link, layout.node.contention, layout.node.wake_s,
                       layout.node.oversubscribed)
    return done[0]


def decode_prompts(sequences, prompt_tokens, new_tokens):
    return [(prompt_tokens, new_tokens)] * sequences


def parse_tau_knots(text):
    """'ROWS:PS,...': a product's picoseconds a weight byte at these row counts (a one-rank trace's or
    bench_kernels' figures for the model's weight type), as a Tau."""
    try:
        pairs = sorted((int(r), float(v) * 1e-12) for r, v in (part.split(":") for part in text.split(",")))
    except ValueError:
        raise SystemExit(f"pipeline_model experts: --tau-knots: expected ROWS:PS[,ROWS:PS...] (e.g. 1:54,8:68,512:2680), found '{text}'")
    if len(pairs) < 2 or pairs[0][0] < 1 or any(v <= 0 for _, v in pairs) or len({r for r, _ in pairs}) < len(pairs):
        raise SystemExit(f"pipeline_model experts: --tau-knots: expected two or more distinct row counts >= 1 with "
                         f"times > 0, found '{text}'")
    return Tau([r for r, _ in pairs], [v for _, v in pairs])


def parse_rates(text, option):
    """'SEQS:TOK_PER_S,...' (measured generated tok/s at that many sequences)."""
    try:
        out = {}
        for part in text.split(","):
            seqs, rate = part.split(":")
            out[int(seqs)] = float(rate)
    except ValueError:
        raise SystemExit(f"pipeline_model: {option}: expected SEQS:TOK_PER_S[,SEQS:TOK_PER_S...] (e.g. 1:44.9,32:302), found '{text}'")
    if any(s < 1 or r <= 0 for s, r in out.items()):
        raise SystemExit(f"pipeline_model: {option}: expected sequences >= 1 and rates > 0, found '{text}'")
    return out


def _bisect_log(f, target, lo, hi, steps=40):
    """x in [lo, hi] (log scale) at which the increasing f(x) meets target; None if it never does."""
    if f(hi) < target or f(lo) > target:
        return None
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return math.sqrt(lo * hi)


CALIBRATION_ROUNDS = 3  # bandwidth and arithmetic fitted in turn: each barely moves the other's workload
MEM_BW_RANGE, OPS_RANGE = (1e8, 1e13), (1e8, 1e16)  # bisection brackets, bytes/s and operations/s


def calibrate_rank_speed(moe, n_ranks, measured, ctx, args):
    """A rank's (bytes/s it streams weights at, operations/s of its products), node_tau's two figures,
    at which the PP-only layout (N stages, E = 1) is predicted at the measured rates: the fewest
    sequences' rate fits the bandwidth (one row a product: streaming), the most sequences' the
    arithmetic. The other layouts are then predictions."""
    few, many = min(measured), max(measured)
    bw, ops = args.mem_gbytes * 1e9, args.ops_tera * 1e12  # one rate given: the arithmetic stays --ops-tera

    def rate(seqs, bw_, ops_):
        node = Node(TAU_FORMS[args.tau_form](bw_, ops_, moe.bpw), args.cores, kv_tau=1.0 / bw_, contention=args.contention)
        layout = ExpertLayout(moe, n_ranks, 1, node, ctx["link"], ctx["routing"])
        prompts = decode_prompts(seqs, args.prompt_tokens, ctx["new_tokens"](seqs))
        return sum(g for _, g in prompts) / predict_expert_job(layout, prompts, args.slots, args.ubatch,
                                                               lambda s, j: 0, {0: args.cores})
    for _ in range(CALIBRATION_ROUNDS):
        fit = _bisect_log(lambda x: rate(few, x, ops), measured[few], *MEM_BW_RANGE)
        if fit is None:
            raise SystemExit(f"pipeline_model experts: --calibrate-pp: no memory bandwidth in {MEM_BW_RANGE} B/s "
                             f"predicts {measured[few]:g} tok/s at {few} sequence(s)")
        bw = fit
        if many == few:
            break
        fit = _bisect_log(lambda x: rate(many, bw, x), measured[many], *OPS_RANGE)
        if fit is None:
            raise SystemExit(f"pipeline_model experts: --calibrate-pp: no arithmetic rate in {OPS_RANGE} op/s "
                             f"predicts {measured[many]:g} tok/s at {many} sequences (with {bw / 1e9:.1f} GB/s)")
        ops = fit
    return bw, ops


# The measured comparison (benchmarks/RESULTS.md, "Expert parallelism against pipeline stages") reproduced
# within this: its runs are medians of three on a shared 2-core VM, and the sweep's runs of one
# configuration spread 5-15% on such machines (RESULTS, scaling study), so a closer match would be luck.
EP_CHECK_TOLERANCE = 0.10


def experts(args):
    moe = moe_shape_from_gguf(args.gguf) if args.gguf else MoeShape.parse(args.shape)
    N = args.ranks
    if N < 1:
        raise SystemExit(f"pipeline_model experts: --ranks: expected a count >= 1, found {N}")
    if args.check:
        sys.exit(0 if expert_self_check(args.gguf) else 1)
    link = Link(args.link_latency_us * 1e-6, args.link_gbytes * 1e9)
    if args.exchange_gbytes is not None and args.exchange_gbytes <= 0:
        raise SystemExit(f"pipeline_model experts: --exchange-gbytes: expected a bandwidth > 0 GB/s, found {args.exchange_gbytes}")
    group_link = Link(link.latency_s, args.exchange_gbytes * 1e9) if args.exchange_gbytes else link
    routing = ExpertRouting(moe, args.routing_samples)
    new_tokens = lambda seqs: args.single_tokens if seqs == 1 else args.batch_tokens
    ctx = {"link": link, "routing": routing, "new_tokens": new_tokens}
    pp = parse_rates(args.calibrate_pp, "--calibrate-pp") if args.calibrate_pp else {}
    measured_ep = parse_rates(args.measured_ep, "--measured-ep") if args.measured_ep else {}
    for option, rates in (("--calibrate-pp", pp), ("--measured-ep", measured_ep)):
        if any(seqs not in (1, args.batch) for seqs in rates):
            raise SystemExit(f"pipeline_model experts: {option}: expected rates at 1 and --batch ({args.batch}) "
                             f"sequences, found {sorted(rates)}")
    if measured_ep and args.measured_ep_e not in [e for _, e in layouts(N, moe)]:
        raise SystemExit(f"pipeline_model experts: --measured-ep-e: expected one of the layouts' E "
                         f"{[e for _, e in layouts(N, moe)]}, found {args.measured_ep_e}")
    knots = parse_tau_knots(args.tau_knots) if args.tau_knots else None
    if knots and pp:
        raise SystemExit("pipeline_model experts: --tau-knots: expected without --calibrate-pp (the knots are the "
                         "rank's measured speed; --calibrate-pp would fit another)")
    if pp and N > moe.n_layer:
        raise SystemExit(f"pipeline_model experts: --calibrate-pp: expected a PP-only layout of --ranks ({N}) stages, "
                         f"which needs at least {N} layers; the model has {moe.n_layer}")
    ep_slots = args.slots if args.ep_slots is None else args.ep_slots
    if not 1 <= ep_slots <= args.slots:
        raise SystemExit(f"pipeline_model experts: --ep-slots: expected 1..--slots ({args.slots}), found {ep_slots}")
    print(f"MoE shape: {moe.describe()}")
    if pp:
        bw, ops = calibrate_rank_speed(moe, N, pp, ctx, args)
        print(f"rank speed fitted to the measured {N} stages x 1 (PP only): " + ", ".join(
            f"{s} sequence(s) {r:g} tok/s" for s, r in sorted(pp.items()))
            + f" -> {bw / 1e9:.1f} GB/s of weights streamed, {ops / 1e9:.0f} G op/s of products"
            + (" (--ops-tera: one rate fits only the bandwidth)" if len(pp) == 1 else "") + " (calibration, not a prediction)")
    else:
        bw, ops = args.mem_gbytes * 1e9, args.ops_tera * 1e12
    node = Node(knots or TAU_FORMS[args.tau_form](bw, ops, moe.bpw), args.cores, kv_tau=1.0 / bw, contention=args.contention)
    if knots:
        print("a product's seconds a weight byte from --tau-knots: " + ", ".join(
            f"{int(k)} rows {v * 1e12:g} ps" for k, v in zip(knots.knots, knots.values)) + " (linear between, and past the last two)")
    print(f"{N} ranks on one host of {args.cores:g} cores (two computing at once run at {args.contention:g} of one "
          f"alone); link {args.link_latency_us:g} us, {args.link_gbytes:g} GB/s"
          + (f" ({args.exchange_gbytes:g} GB/s for the expert groups' messages)" if args.exchange_gbytes else "")
          + ("; products priced by --tau-knots" if knots else f"; products priced by node_tau's {args.tau_form} form")
          + f"; one sequence of "
          f"{args.prompt_tokens} prompt + {args.single_tokens} new tokens; {args.batch} sequences x "
          f"{args.batch_tokens} new; {args.slots} slots"
          + (f" ({ep_slots} in the expert-parallel layouts, --ep-slots: the excess sequences wait for a free one)"
             if ep_slots != args.slots else "") + f", ubatch {args.ubatch}, decode groups = stages")
    rows = []
    for P, E in layouts(N, moe):
        layout = ExpertLayout(moe, P, E, node, link, routing, group_link)
        slots = ep_slots if E > 1 else args.slots
        rates = {}
        for seqs in (1, args.batch):
            prompts = decode_prompts(seqs, args.prompt_tokens, new_tokens(seqs))
            span = predict_expert_job(layout, prompts, slots, args.ubatch, lambda s, j: 0, {0: args.cores})
            rates[seqs] = sum(g for _, g in prompts) / span
        held = rank_weight_bytes(moe, P, E)
        kv = max(kv_bytes_of_stage(moe, P, s, slots, args.ctx) for s in range(P))
        rows.append((P, E, held, kv, rates))
    scale, unit = (2**20, "MiB") if max(b for r in rows for *_, b in r[2]) >= 10 * 2**20 else (2**10, "KiB")
    print()
    print(f"| stages x expert-parallel | weights a rank, {unit} (world rank order) | KV cache a rank, MiB ("
          + (f"{args.slots} or --ep-slots {ep_slots}" if ep_slots != args.slots else f"{args.slots}") + f" x "
          f"{args.ctx} positions) | 1 sequence, tok/s | {args.batch} sequences, tok/s |")
    print("|---|---|---:|---:|---:|")
    base = next((r[4] for r in rows if r[1] == 1), None)  # PP only: N stages (none when N exceeds the layers)
    for P, E, held, kv, rates in rows:
        rel = lambda s: "" if E == 1 or base is None else f" ({rates[s] / base[s]:.2f}x)"
        print(f"| {P} x {E} | {' / '.join(f'{b / scale:.0f}' for *_, b in held)} | {kv / 2**20:.0f} | "
              f"{rates[1]:.1f}{rel(1)} | {rates[args.batch]:.0f}{rel(args.batch)} |")
    for seqs, what in ((1, "one sequence"), (args.batch, f"{args.batch} sequences")):
        best = max(rows, key=lambda r: r[4][seqs])
        print(f"{what}: {best[0]} x {best[1]} is fastest ({best[4][seqs]:.1f} tok/s)")
    lightest = min(rows, key=lambda r: max(b for *_, b in r[2]))
    print(f"least memory on the fullest rank: {lightest[0]} x {lightest[1]} "
          f"({max(b for *_, b in lightest[2]) / scale:.0f} {unit} of weights)")
    if measured_ep:
        P, E, _, _, rates = next(r for r in rows if r[1] == args.measured_ep_e)
        print()
        print(f"predicted against measured, {P} x {E} (tolerance {100 * EP_CHECK_TOLERANCE:.0f}%):")
        print("| sequences | measured tok/s | predicted | error | predicted ratio to PP only | measured ratio |")
        print("|---:|---:|---:|---:|---:|---:|")
        ok = True
        for seqs, m in sorted(measured_ep.items()):
            err = rates[seqs] / m - 1
            ok &= abs(err) <= EP_CHECK_TOLERANCE
            mratio = f"{m / pp[seqs]:.2f}" if seqs in pp else "-"
            print(f"| {seqs} | {m:g} | {rates[seqs]:.1f} | {100 * err:+.1f}%{'' if abs(err) <= EP_CHECK_TOLERANCE else ' **'} | "
                  + (f"{rates[seqs] / base[seqs]:.2f}" if base else "-") + f" | {mratio} |")
        print("within the tolerance" if ok else "** outside the tolerance")


# Self-check tolerances: sums of the same bytes in another order, and the Monte Carlo's standard error.
SUM_REL_TOLERANCE = 1e-9
MC_STANDARD_ERRORS = 4


def exact_busiest_load(X, k, E):
    """The busiest member's expected count of one token's k distinct experts (of X, member e % E),
    by enumerating every choice."""
    total, count = 0, 0
    for chosen in itertools.combinations(range(X), k):
        per = Counter(e % E for e in chosen)
        total += max(per.values())
        count += 1
    return total / count


def expert_self_check(gguf=None):
    """The expert-parallel entry's arithmetic, each check able to fail: (0) with a GGUF file, its tensors'
    sizes fill its data section but for the alignment padding; (1) the ranks' weights add up to the
    file's tensors plus the E - 1 extra copies of each stage's replicated bytes (and the embedding's
    second copy when the head is tied to it), each rank holding 1/E of its stage's experts; (2) E = 1 on a MoE whose tokens take every expert (k = X) predicts what the
    PP-only model (predict_job, a dense Shape of the same layer bytes) does, and partition_layers splits as
    partition_by_bytes; (3) the routing draws give the busiest member's exact expected load at one token."""
    ok = True

    def report(name, passed, detail):
        nonlocal ok
        ok &= passed
        print(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}")

    shapes = dict(MOE_PRESETS)
    if gguf:
        import os
        moe = moe_shape_from_gguf(gguf)
        meta, tensors, data_start = read_gguf_header(gguf)
        data = os.path.getsize(gguf) - data_start
        total = sum(b for *_, b in moe.tensors())
        pad = meta.get("general.alignment", 32) * len(tensors)
        report(f"tensor sizes, {gguf}", 0 <= data - total < pad,
               f"{total} bytes of {len(tensors)} tensors in a data section of {data} (padding below {pad} allowed)")
        shapes[gguf] = moe
        formula_check(moe, meta, tensors, report)
    for name, moe in shapes.items():
        tied = not any(n == "output.weight" for _, n, _ in moe.tensors()) if moe.file_tensors else False
        total = sum(b for *_, b in moe.tensors()) + (moe.embed_bytes() if tied else 0.0)
        unit = (1e9, "GB") if total > 1e8 else (1e3, "KB")
        rep, exp = moe.layer_split_bytes()
        worst = 0.0
        for N in (1, 2, 4, 8, 16):
            for P, E in layouts(N, moe):
                split = moe_split(moe, P)
                held = rank_weight_bytes(moe, P, E)
                extra = (E - 1) * sum(sum(rep[a:b]) for a, b in split)
                worst = max(worst, abs(sum(b for *_, b in held) - extra - total) / total)
                for s, j, b in held:  # a member's share of its stage: replicated + experts / E (+ embedding, head)
                    a_, b_ = split[s]
                    ends = moe.embed_bytes() * (s == 0) + moe.head_bytes() * (s == P - 1) if j == 0 else 0.0
                    worst = max(worst, abs(b - ends - sum(rep[a_:b_]) - sum(exp[a_:b_]) / E) / total)
        report(f"memory split, {name}", worst <= SUM_REL_TOLERANCE,
               f"ranks' weights - replicated copies against the file's {total / unit[0]:.3f} {unit[1]}: worst relative gap {worst:.1e}")

    dense = MoeShape(n_embd=256, n_layer=6, n_head=8, n_head_kv=2, n_ff=0, n_vocab=1000, type="q8_0", n_expert=4,
                     n_expert_used=4, n_ff_expert=96)
    rep, exp = dense.layer_split_bytes()
    shape = Shape(256, 6, 8, 2, 0, 1000, "q8_0", layer_bytes_override=rep[0] + exp[0])
    node = Node(node_tau(20e9, 2e11, dense.bpw), 2.0, kv_tau=1.0 / 20e9, contention=0.85)
    link = Link(SHM_LATENCY_US * 1e-6, SHM_GBYTES * 1e9)
    prompts = [(9, 5), (3, 7), (12, 4), (5, 6)]
    worst, splits_agree = 0.0, True
    for P in (1, 2, 3):
        splits_agree &= partition_layers([rep[0] + exp[0]] * 6, dense.head_bytes(), P) == partition_by_bytes(shape, P)
        pp = predict_job(Job(shape, prompts, P, 1, 8, 4), node, link)
        ep = predict_expert_job(ExpertLayout(dense, P, 1, node, link, ExpertRouting(dense)), prompts, 4, 8,
                                lambda s, j: 0, {0: 2.0})
        worst = max(worst, abs(ep / pp - 1))
    report("E = 1 against the PP-only model", worst <= SUM_REL_TOLERANCE and splits_agree,
           f"spans of 1, 2, 3 stages: worst relative gap {worst:.1e}; byte splits {'agree' if splits_agree else 'DIFFER'}")

    X, k, samples = 16, 4, 4000
    moe = MoeShape(n_embd=64, n_layer=2, n_head=4, n_head_kv=4, n_ff=0, n_vocab=100, type="f32", n_expert=X,
                   n_expert_used=k, n_ff_expert=32)
    loads = ExpertRouting(moe, samples).loads(1)
    for E in (2, 4):
        busiest = loads.reshape(samples, moe.n_moe_layers, X // E, E).sum(axis=2).max(axis=2).ravel()
        exact = exact_busiest_load(X, k, E)
        se = busiest.std() / math.sqrt(busiest.size)
        report(f"busiest member at one token, {k} of {X} experts over {E}",
               abs(busiest.mean() - exact) <= MC_STANDARD_ERRORS * se,
               f"draws {busiest.mean():.3f} (standard error {se:.3f}), exact {exact:.3f}, k / E {k / E:g}")
    # The split by sequence as TransformerStage::plan_sequence_split plans it: whole chunks, largest first to the
    # least loaded member; not split with fewer sequences than members or a member under the minimum.
    cases = [((1,) * 32, 2, [16, 16]), ((7, 6, 5, 4), 2, [11, 11]), ((7, 6, 5, 4), 4, [7, 6, 5, 4]),
             ((40,), 2, None), ((1,) * 6, 4, None), ((6, 4, 5), 2, [6, 9]), ((4, 4, 8), 2, [8, 8]), ((9, 1), 2, None)]
    got = [ep_member_tokens(E, chunks) for chunks, E, _ in cases]
    report("split by sequence: the members' tokens as the stage plans them",
           all(g == want for g, (_, _, want) in zip(got, cases)),
           "; ".join(f"{len(c)} chunks over {E}: {g}" for g, (c, E, _) in zip(got, cases)))
    return ok


GGML_TYPE_NAMES = {0: "f32", 1: "f16", 30: "bf16", 8: "q8_0", 2: "q4_0", 12: "q4_k", 13: "q5_k", 14: "q6_k"}


def formula_check(moe, meta, tensors, report):
    """MoeShape's formulas (what --shape and the presets use) against a file: from its metadata alone they
    must give each layer's matrices (its 2-D and 3-D tensors) the file's bytes. Only for a file whose
    matrices but the router share one type and whose attention is not latent (the formula takes the
    latter's bytes as given)."""
    arch = meta.get("general.architecture", "")
    types = {t for name, dims, t in tensors if len(dims) >= 2 and "ffn_gate_inp" not in name}
    if len(types) != 1 or next(iter(types)) not in GGML_TYPE_NAMES or moe.kv_lora_rank:
        print(f"skip formulas against the file: mixed or unlisted types {sorted(types)}, or latent attention")
        return
    shared = meta.get(f"{arch}.expert_shared_feed_forward_length", 0)
    form = MoeShape(n_embd=moe.n_embd, n_layer=moe.n_layer, n_head=moe.n_head, n_head_kv=moe.n_head_kv, n_ff=moe.n_ff,
                    n_vocab=moe.n_vocab, type=GGML_TYPE_NAMES[next(iter(types))], n_expert=moe.n_expert,
                    n_expert_used=moe.n_expert_used, n_ff_expert=moe.n_ff_expert, n_ff_shexp=shared,
                    n_dense_lead=moe.n_dense_lead, head_dim=moe.head_dim)
    matrices = defaultdict(float)
    for (name, dims, _), (layer, _, b) in zip(tensors, moe.file_tensors):
        if layer is not None and len(dims) >= 2:
            matrices[layer] += b
    by_layer = defaultdict(float)
    for layer, _, b in form.tensors():
        if layer is not None:
            by_layer[layer] += b
    worst = max(abs(by_layer[l] - matrices[l]) / matrices[l] for l in range(moe.n_layer))
    report("formulas against the file", worst <= SUM_REL_TOLERANCE,
           f"each layer's matrices from the metadata against the file's: worst relative gap {worst:.1e}")


EP_NETWORKS = {  # the cluster table's links, as MPI sees them (25 GbE as NETWORKS has it)
    "25 GbE": NETWORKS["25 GbE"],
    "100 GbE": Link(8e-6, 11.5e9),  # TCP or RoCE; about 92 Gbit/s of payload
}


def experts_cluster(args):
    moe = moe_shape_from_gguf(args.gguf) if args.gguf else MoeShape.parse(args.shape)
    node = Node(TAU_FORMS[args.tau_form](args.mem_gbytes * 1e9, args.int8_tops * 1e12, moe.bpw), cores=1.0,
                kv_tau=1.0 / (args.mem_gbytes * 1e9))
    routing = ExpertRouting(moe, args.routing_samples)
    names = list(EP_NETWORKS)
    print(f"MoE shape: {moe.describe()}")
    print(f"node: {args.mem_gbytes:g} GB/s memory bandwidth for weight streaming, {args.int8_tops:g} int8 TOP/s for "
          f"products; one rank a node (member j of stage s on its own node); decode: one sequence of "
          f"{args.prompt_tokens} + {args.single_tokens} new tokens, and {args.batch} sequences x {args.batch_tokens} "
          f"new; {args.slots} slots, decode groups = stages")
    print("networks: " + "; ".join(f"{n}: {l.latency_s * 1e6:g} us, {l.bandwidth_Bps / 1e9:g} GB/s" for n, l in EP_NETWORKS.items()))
    print()
    print("| nodes | stages x expert-parallel | weights on the fullest node, GB | "
          + " | ".join(f"1 sequence tok/s, {n}" for n in names) + " | "
          + " | ".join(f"{args.batch} sequences tok/s, {n}" for n in names) + " |")
    print("|---:|---|---:|" + "---:|" * (2 * len(names)))
    verdicts = []
    for N in args.nodes:
        rows = []
        for P, E in layouts(N, moe):
            rates = {}
            for net in names:
                layout = ExpertLayout(moe, P, E, node, EP_NETWORKS[net], routing)
                for seqs, new in ((1, args.single_tokens), (args.batch, args.batch_tokens)):
                    prompts = decode_prompts(seqs, args.prompt_tokens, new)
                    span = predict_expert_job(layout, prompts, args.slots, args.ubatch, lambda s, j, P=P: j * P + s,
                                              {h: 1.0 for h in range(N)})
                    rates[(net, seqs)] = sum(g for _, g in prompts) / span
            fullest = max(b for *_, b in rank_weight_bytes(moe, P, E))
            rows.append((P, E, rates))
            print(f"| {N} | {P} x {E} | {fullest / 1e9:.1f} | "
                  + " | ".join(f"{rates[(n, 1)]:.1f}" for n in names) + " | "
                  + " | ".join(f"{rates[(n, args.batch)]:.0f}" for n in names) + " |")
        for net in names:
            one = max(rows, key=lambda r: r[2][(net, 1)])
            many = max(rows, key=lambda r: r[2][(net, args.batch)])
            verdicts.append(f"{N} nodes, {net}: one sequence fastest on {one[0]} x {one[1]}, {args.batch} sequences "
                            f"on {many[0]} x {many[1]}")
    print()
    print("\n".join(verdicts))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="calibrate on the sweep's one-rank runs and predict every configuration")
    p.add_argument("--sweep", required=True)
    p.add_argument("--calibration", required=True)
    p.add_argument("--workloads", required=True)
    p.add_argument("--shape", required=True, help="'n_embd=512 n_layer=8 n_head=8 n_head_kv=4 n_ff=1536 n_vocab=8192 type=q8_0'")
    p.add_argument("--cores", type=float, default=2.0, help="cores the job's ranks share (this machine: 2)")
    p.add_argument("--link-latency-us", type=float, default=SHM_LATENCY_US)
    p.add_argument("--link-gbytes", type=float, default=SHM_GBYTES, help="link bandwidth, GB/s")
    p.add_argument("--tolerance-pct", type=float, default=15.0, help="the README's target for the model")
    p.add_argument("--max-other-cores", type=float, default=0.25,
                   help="leave out runs during which other processes used more CPU than this (sweep.sh's MAX_OTHER_CORES)")
    p.add_argument("--out")
    h = sub.add_parser("hop", help="predict bench_hop_latency.sh's runs (calibrated on the sweep)")
    h.add_argument("--hop-csv", required=True, help="bench_hop_latency.sh's CSV")
    h.add_argument("--sweep", required=True)
    h.add_argument("--calibration", required=True)
    h.add_argument("--workloads", required=True)
    h.add_argument("--shape", required=True)
    h.add_argument("--cores", type=float, default=2.0)
    # TCP between network namespaces on this machine (machine-notes.md): 16 us, 1.6 GB/s.
    h.add_argument("--link-latency-us", type=float, default=16.0)
    h.add_argument("--link-gbytes", type=float, default=1.6)
    c = sub.add_parser("cluster", help="predict a 70B Q4_K model on 2, 4, 8 EPYC nodes over three networks")
    # An EPYC 9654 (Genoa, 96 cores, 12 x DDR5-4800 = 461 GB/s peak): STREAM reaches about 360 GB/s; weight
    # streaming is taken at 300 GB/s (this project's GEMV reaches 85% of read bandwidth on one core here).
    c.add_argument("--mem-gbytes", type=float, default=300.0, help="memory bandwidth a node streams weights at, GB/s")
    # Prefill arithmetic: this machine's Q8_0 products reach about 150 G int8 op/s a core at 128 rows (tau
    # of the sweep's calibration); 96 cores at 60% of that (Q4_K unpacking, scaling over cores) is ~8.6.
    c.add_argument("--int8-tops", type=float, default=8.0, help="int8 tera-operations a second a node sustains")
    c.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    c.add_argument("--ubatch", type=int, default=512)
    c.add_argument("--slots", type=int, default=32, help="sequences in flight a pipeline (glacier's default cap)")
    c.add_argument("--prefill-prompts", type=int, default=256)
    c.add_argument("--prefill-tokens", type=int, default=512)
    # Enough sequences to fill every replica's slots (8 replicas x 32), so layouts are compared at full load.
    c.add_argument("--decode-prompts", type=int, default=256)
    c.add_argument("--decode-prompt-tokens", type=int, default=16)
    c.add_argument("--decode-new-tokens", type=int, default=128)
    c.add_argument("--replicas-row", action=argparse.BooleanOptionalAction, default=True,
                   help="also show every node running the whole model on its own (replicas, no network)")
    for name, helptext in (("experts", "pipeline stages against expert parallelism for a MoE model on one host: "
                                        "every P x E of --ranks"),
                           ("experts-cluster", "the same for a Qwen3-MoE-235B-shaped model on EPYC nodes over 25 "
                                               "and 100 GbE")):
        x = sub.add_parser(name, help=helptext)
        x.add_argument("--shape", default="deepseek2-synthetic" if name == "experts" else "qwen3-moe-235b",
                       help=f"one of {sorted(MOE_PRESETS)}, or MoeShape's key=value pairs: 'n_embd=2048 n_layer=24 "
                            "n_head=16 n_head_kv=4 n_ff=0 n_vocab=32000 type=q8_0 n_expert=64 n_expert_used=8 "
                            "n_ff_expert=512 [n_ff_shexp=S n_dense_lead=D head_dim=H attn_bytes=B kv_lora_rank=R rope_dim=D]'")
        x.add_argument("--gguf", help="take the shape and every tensor's bytes from this MoE GGUF file (in place of --shape)")
        x.add_argument("--prompt-tokens", type=int, default=16, help="tokens of every prompt")
        x.add_argument("--single-tokens", type=int, default=128, help="new tokens of the one-sequence run")
        x.add_argument("--batch", type=int, default=32, help="sequences of the batch run")
        x.add_argument("--batch-tokens", type=int, default=64 if name == "experts" else 128,
                       help="new tokens of each of the batch run's sequences")
        x.add_argument("--slots", type=int, default=32, help="sequences in flight (glacier's default cap)")
        x.add_argument("--ubatch", type=int, default=512)
        x.add_argument("--tau-form", choices=sorted(TAU_FORMS), default="max",
                       help="a product's seconds a weight byte: sum = streaming + arithmetic (the float GEMMs, "
                            "BF16/F16), max = whichever is longer (the int8 GEMMs of the quantized types)")
        x.add_argument("--routing-samples", type=int, default=EP_ROUTING_SAMPLES,
                       help="routings drawn a micro-batch size for the busiest member's load")
    x = sub.choices["experts"]
    x.add_argument("--ranks", type=int, default=2, help="N: every P x E = N is predicted")
    x.add_argument("--cores", type=float, default=2.0, help="cores the ranks share (this machine: 2)")
    # The Zen 5 sweep's fitted decode contention (results/amd-epyc-zen5, `predict` prints it): two ranks
    # computing at once each run at 0.846 of one alone.
    x.add_argument("--contention", type=float, default=0.846, help="speed of a rank while another computes on the host")
    x.add_argument("--link-latency-us", type=float, default=SHM_LATENCY_US)
    x.add_argument("--link-gbytes", type=float, default=SHM_GBYTES, help="link bandwidth, GB/s")
    x.add_argument("--exchange-gbytes", type=float,
                   help="bandwidth of the expert groups' hand-offs and exchanges, GB/s (default: --link-gbytes); "
                        "what the exchange costs is the least known part of the model here")
    # Defaults: what --calibrate-pp 1:44.9,32:302 fits (RESULTS' two-stage runs of the BF16 DeepSeek-2-shaped
    # model on the Zen 5 VM, one thread a rank, max form).
    x.add_argument("--mem-gbytes", type=float, default=18.4,
                   help="GB/s a rank streams weights at (node_tau), when --calibrate-pp does not fit it")
    x.add_argument("--ops-tera", type=float, default=0.14,
                   help="tera-operations a second of a rank's products (node_tau), when --calibrate-pp does not fit it")
    x.add_argument("--calibrate-pp", metavar="SEQS:TOK_S,...",
                   help="measured generated tok/s of the PP-only layout (--ranks stages) at 1 and --batch sequences: "
                        "fits --mem-gbytes (the fewest sequences) and --ops-tera (the most)")
    x.add_argument("--tau-knots", metavar="ROWS:PS,...",
                   help="a product's picoseconds a weight byte at these row counts (measured), in place of node_tau "
                        "(the KV reads stay at 1 / --mem-gbytes)")
    x.add_argument("--measured-ep", metavar="SEQS:TOK_S,...",
                   help="measured generated tok/s of the P x --measured-ep-e layout, shown against its prediction")
    x.add_argument("--measured-ep-e", type=int, default=2, help="E of the layout --measured-ep measured")
    # glacier fits its KV slots to the memory a rank has left, and every member of an expert group keeps its
    # whole stage's KV cache: on one host the expert-parallel run may get fewer slots than the PP-only one
    # (qwen3moe q8_0 on the Zen 5 VM: 29-30 against 32), and the sequences beyond them wait, then decode
    # alone at a few rows (a tail of 2-row micro-batches in the 32-sequence trace: 1.25 of its 9.6 s).
    x.add_argument("--ep-slots", type=int,
                   help="KV slots of the expert-parallel layouts (E > 1) as the measured run's log gives them "
                        "('rank 0: N KV slots'); default --slots")
    x.add_argument("--ctx", type=int, default=2048, help="positions a slot's KV cache holds (the memory column)")
    x.add_argument("--check", action="store_true", help="check the entry's arithmetic (memory split, E = 1 against "
                   "the PP-only model, the routing draws; with --gguf, the file's tensor sizes too) and exit 1 on a failure")
    x = sub.choices["experts-cluster"]
    x.add_argument("--mem-gbytes", type=float, default=300.0, help="memory bandwidth a node streams weights at, GB/s")
    x.add_argument("--int8-tops", type=float, default=8.0, help="int8 tera-operations a second a node sustains")
    x.add_argument("--nodes", type=int, nargs="+", default=[8, 16, 32])
    args = ap.parse_args()
    if args.command in ("experts", "experts-cluster"):
        for opt in ("prompt_tokens", "single_tokens", "batch", "batch_tokens", "slots", "ubatch", "routing_samples"):
            if getattr(args, opt) < 1:
                raise SystemExit(f"pipeline_model {args.command}: --{opt.replace('_', '-')}: expected a count >= 1, "
                                 f"found {getattr(args, opt)}")
        if args.batch > args.slots:
            raise SystemExit(f"pipeline_model {args.command}: --batch: expected at most --slots ({args.slots}) "
                             f"sequences (one pipeline's), found {args.batch}")
    if args.command == "experts":
        experts(args)
    elif args.command == "experts-cluster":
        experts_cluster(args)
    elif args.command == "predict":
        predict_sweep(args)
    elif args.command == "hop":
        predict_hop(args)
    elif args.command == "cluster":
        cluster(args)


if __name__ == "__main__":
    main()
