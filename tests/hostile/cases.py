"""Valid inputs of every kind the testbed reads, the commands that read them, and the
ways a hostile file breaks them.

A *kind* is a file format (scenario YAML, system profile, failure trace, …) with a
small valid example. A *reader* is a command line that reads a file of that kind,
``{f}`` standing for the file and ``{out}`` for a folder where the command would
write (it must stay untouched). A *mutation* turns valid bytes into bytes that are
certainly invalid for every kind (bytes that are not UTF-8, a NUL, an empty file, …)
or, for structured kinds, invalid at the YAML or CSV level.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SCENARIO = """\
name: hostile
workload: {compute_time: 48h}
cluster: {nodes: 4, spares: 1, repair: 2h}
failures: {distribution: exponential, node_mtbf: 5d, detect: 1min, restart: 5min}
checkpoint: {policy: daly, cost: 2min, restart: 3min}
simulation: {replications: 3, seed: 1}
"""

SYSTEM = """\
name: hostile-system
description: a small made-up profile for the hostile-input tests
gpu: {model: TestGPU, memory_GiB: 16, peak_TFLOPS: {fp32: 10.0, fp16: 80.0}}
node: {gpus_per_node: 4, cpu_cores: 16, memory_GiB: 64}
network:
  tiers:
    - {name: intra, span_gpus: 4, latency_us: 5.0, bandwidth_GBps: 50.0}
    - {name: inter, span_gpus: 1024, latency_us: 10.0, bandwidth_GBps: 12.5}
storage: {pfs_read_bandwidth_GBps: 10.0, pfs_write_bandwidth_GBps: 5.0, pfs_per_node_GBps: 2.0}
"""

TRACE = """\
time_s,node,cause,repair_s
2h,1,Faulty GPU,6h
9h,2,Software bug,
20h,0,Network,1h
"""

FTA = ("1\t1\t101\t7\tn101\t0\t1136080800\t1136095200\t1\n"
       "2\t2\t102\t7\tn102\t0\t1136102400\t1136103300\t2\n")

CAUSES = "cause,category,count\nFaulty GPU,GPU,148\nSoftware bug,Dependency,54\n"

CALIBRATION_CSV = (
    "model,strategy,gpus,gpus_per_group,samples_per_gpu,global_batch,input_sample_shape,"
    "s_per_iter_median\n"
    "resnet50,data,1,1,32,32,3x224x224,0.11\n"
    "resnet50,data,4,1,32,128,3x224x224,0.13\n")

HPO_SCENARIO = """\
name: hostile-hpo
cluster: {nodes: 1, gpus_per_node: 4}
hpo:
  search: grid
  space: {optimizer: [adam, sgd], batch_size: [32, 64], epochs: [2, 5]}
  trial_resources: {gpus: 1}
  epoch_time: 1s
  scheduler: fifo
  on_failure: retry
"""

#: An HPO schedule trace as `testbed hpo simulate --events` writes it (2 trials, 2 slots).
HPO_TRACE = (
    '{"event":"job_start","gpus_per_node":2,"hpo":"tiny","max_retries":2,"metric":"val_loss",'
    '"mode":"min","nodes":1,"on_failure":"retry","rungs":[1,2,3],"scheduler":"fifo",'
    '"search":"grid","seed":0,"slots":2,"t_s":0.0,"trials":2}\n'
    '{"attempt":0,"config":{"lr":0.1},"event":"trial_start","from_epoch":0,"kind":"new",'
    '"node":0,"slots":[0],"t_s":0.0,"to_epoch":2,"trial":0}\n'
    '{"attempt":0,"config":{"lr":0.01},"event":"trial_start","from_epoch":0,"kind":"new",'
    '"node":0,"slots":[1],"t_s":0.0,"to_epoch":2,"trial":1}\n'
    '{"attempt":0,"epoch":2,"event":"trial_end","status":"completed","t_s":2.0,"trial":0,'
    '"value":1.94655621749}\n'
    '{"attempt":0,"epoch":2,"event":"trial_end","status":"completed","t_s":2.0,"trial":1,'
    '"value":1.88387818804}\n'
    '{"event":"job_end","status":"completed","t_s":2.0}\n')

#: (what is replaced, by what, the field named): one nonsense field per HPO trace event.
HPO_TRACE_VALUES = [
    ('"slots":[0]', '"slots":[7]', "slots"),           # a slot the cluster does not have
    ('"slots":[0]', '"slots":"0"', "slots"),
    ('"slots":2,', '"slots":0,', "slots"),
    ('"from_epoch":0,"kind":"new","node":0,"slots":[0]', '"from_epoch":5,"kind":"new",'
     '"node":0,"slots":[0]', "to_epoch"),
    ('"t_s":0.0,"to_epoch":2,"trial":0', '"t_s":1e300,"to_epoch":2,"trial":0', "t_s"),
    ('"status":"completed","t_s":2.0,"trial":0', '"t_s":2.0,"trial":0', "status"),
    ('"status":"completed","t_s":2.0,"trial":0', '"status":"won","t_s":2.0,"trial":0',
     "status"),
    ('"value":1.94655621749', '"value":"low"', "value"),
    ('"value":1.94655621749', '"value":NaN', "NaN"),       # strict JSON
    ('"attempt":0,"epoch":2', '"attempt":-1,"epoch":2', "attempt"),
    ('"attempt":0,"epoch":2', '"attempt":0,"epoch":2.5', "epoch"),
    ('"trial":1}', '"trial":true}', "trial"),
    ('"nodes":1,', '"nodes":"retry",', "nodes"),
    ('"nodes":1,', '"nodes":100000000000,', "nodes"),
    ('"gpus_per_node":2,', '"gpus_per_node":2000000,', "gpus_per_node"),
    ('"gpus_per_node":2,', '"gpus_per_node":2,"slots":2,', "duplicate key 'slots'"),
    ('"rungs":[1,2,3]', '"rungs":[1]', "rungs"),
    ('"max_retries":2', '"max_retries":-2', "max_retries"),
    ('"mode":"min"', '"mode":"sideways"', "mode"),
]

KILL_TRACE = '{"at_step": 2}\n{"during_checkpoint": true}\n'

#: The calibrated profile a replay needs (the committed calibration set of this machine).
REPLAY_PROFILE = str(Path(__file__).resolve().parents[2] / "traces" / "measurements" / "vm"
                     / "profile.yaml")
_RUN_CONFIG = ('{"batch_size":16,"framework":"torch","input_shape":"1x8x8","model":"mlp",'
               '"model_options":{"width":64}}')
#: A supervised run's timeline as `testbed real-run train --timeline` writes it: 8 steps,
#: a checkpoint every 4, one kill after step 6.
TIMELINE = (
    '{"checkpoint_every":4,"config":' + _RUN_CONFIG + ',"event":"job_start",'
    '"framework":"torch","incarnation":0,"model":"mlp","steps":8,"t_s":0.0}\n'
    '{"bytes":100,"duration_s":0.05,"event":"checkpoint_commit","step":4,"t_s":3.6}\n'
    '{"at_s":null,"at_step":6,"cause":"sigkill","during_checkpoint":false,"event":"failure",'
    '"node":0,"step":6,"t_s":3.7,"when":"after step 6"}\n'
    '{"event":"restart_end","lost_steps":2,"step":4,"t_s":6.8}\n'
    '{"event":"job_end","step":8,"t_s":6.9}\n')

DATASET = "x1,x2,label\n" + "".join(f"{i * 0.5},{(i * 7) % 5},{i % 2}\n" for i in range(40))

KINDS: dict[str, str] = {"scenario": SCENARIO, "system": SYSTEM, "trace": TRACE, "fta": FTA,
                         "causes": CAUSES, "calibration": CALIBRATION_CSV, "hpo": HPO_SCENARIO,
                         "kill": KILL_TRACE, "dataset": DATASET,
                         "hpo_trace": HPO_TRACE, "timeline": TIMELINE}
SUFFIX = {"scenario": ".yaml", "system": ".yaml", "trace": ".csv", "fta": ".tab",
          "causes": ".csv", "calibration": ".csv", "net": ".net", "hpo": ".yaml",
          "kill": ".jsonl", "dataset": ".csv", "records": ".jsonl",
          "hpo_trace": ".jsonl", "timeline": ".jsonl"}

#: Scenario that points at another file of a kind (``{f}`` is that file).
REFERRING_SCENARIO = {
    "system": ("name: refers\nsystem: {f}\nmodel: {{name: resnet50}}\n"
               "parallelism: {{strategy: data, gpus: 8, global_batch: 256}}\n"
               "workload: {{steps: 1000}}\ncheckpoint: {{policy: fixed, interval: 1h, cost: 1min,"
               " restart: 1min}}\nsimulation: {{replications: 2}}\n"),
    "trace": ("name: refers\nworkload: {{compute_time: 30h}}\ncluster: {{nodes: 4}}\n"
              "failures: {{trace: {f}}}\ncheckpoint: {{policy: fixed, interval: 1h, cost: 1min,"
              " restart: 1min}}\nsimulation: {{replications: 2}}\n"),
    "causes": ("name: refers\nworkload: {{compute_time: 30h}}\ncluster: {{nodes: 4}}\n"
               "failures: {{mtbf: 10h, causes: {f}}}\ncheckpoint: {{policy: fixed, interval: 1h,"
               " cost: 1min, restart: 1min}}\nsimulation: {{replications: 2}}\n"),
}

#: Command lines reading a file of each kind.
READERS: dict[str, list[list[str]]] = {
    "scenario": [["simulate", "{f}", "-r", "2", "--events", "{out}/events.jsonl"],
                 ["run", "{f}", "-r", "2", "-o", "{out}/report"],
                 ["sweep", "{f}", "--grid", "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h", "-r", "2",
                  "--store", "{out}/s.db", "--workers", "1", "-q"],
                 ["report", "{f}", "-o", "{out}/report"]],
    "system": [["oracle", "predict", "--system", "{f}", "--model", "resnet50", "--strategy",
                "data", "--gpus", "8", "--global-batch", "256"],
               ["oracle", "sweep", "--system", "{f}", "--model", "alexnet",
                "--global-batch", "256"],
               ["simulate", "{ref}"]],
    "trace": [["traces", "check", "{f}"], ["simulate", "{ref}"]],
    "fta": [["traces", "import-fta", "{f}", "-o", "{out}/trace.csv"]],
    "causes": [["simulate", "{ref}"]],
    "calibration": [["oracle", "verify", "{f}", "--system", "abci-v100"],
                    ["calibrate", "{f}", "--system", "abci-v100", "--dry-run"],
                    ["records", "import-paradl", "{f}", "-o", "{out}/records.jsonl"]],
    "hpo": [["hpo", "simulate", "{f}"]],
    "hpo_trace": [["hpo", "replay", "{f}"]],
    "timeline": [["simulate", "--replay-run", "{f}", "--system", REPLAY_PROFILE]],
    "kill": [["real-run", "train", "--framework", "chainer", "--steps", "4",
              "--checkpoint-every", "2", "--kill-trace", "{f}", "--ckpt-dir", "{out}/ck"]],
    "dataset": [["precision-study", "--dataset", "{f}", "--target", "label", "--precisions",
                 "fp32", "--seeds", "1", "-q"]],
    "records": [["records", "check", "{f}"],
                ["calibrate", "{f}", "--base", "laptop-cpu", "-o", "{out}/p.yaml"],
                ["verify", "laptop-cpu", "{f}"]],
    "net": [["model", "info", "{f}"],
            ["oracle", "predict", "--system", "abci-v100", "--model", "{f}", "--strategy",
             "data", "--gpus", "4", "--global-batch", "64"]],
}


def _insert(data: bytes, junk: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + junk + data[mid:]


#: Byte-level mutations that make any text input invalid.
BYTE_MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "not-utf8": lambda d: _insert(d, b"\xff\xfe\xc3"),
    "nul-byte": lambda d: _insert(d, b"\x00"),
    "latin1": lambda d: _insert(d, "é".encode("latin-1")),
    "empty": lambda d: b"",
}

ALIAS_BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
              "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
              "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
              "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n")

#: YAML-level mutations of the scenario and profile kinds (text → text).
YAML_MUTATIONS: dict[str, Callable[[str], str]] = {
    "alias-bomb": lambda t: ALIAS_BOMB,
    "deep-nesting": lambda t: "name: " + "[" * 5000 + "]" * 5000 + "\n",
    "deep-mapping": lambda t: "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n",
    "duplicate-key": lambda t: t + t.splitlines()[0] + "\n",
    "python-object": lambda t: t + "evil: !!python/object/apply:os.system ['echo pwned']\n",
    "not-a-mapping": lambda t: "- just\n- a list\n",
    "syntax-error": lambda t: t + "broken: [unclosed\n",
    "tab-indent": lambda t: t.replace("\n", "\n\t", 1),
}

#: Scenario values that are well-formed YAML but nonsense (key path, value text).
SCENARIO_VALUES = [
    ("failures.node_mtbf", ".nan"), ("failures.node_mtbf", ".inf"), ("failures.node_mtbf", "-5h"),
    ("failures.node_mtbf", "1e-9"), ("workload.compute_time", "1e300h"),
    ("cluster.repair", "1e30h"), ("checkpoint.cost", "1e300"), ("cluster.nodes", "0"),
    ("cluster.nodes", "1e12"), ("simulation.replications", "1000000000000"),
    ("simulation.seed", "-1"), ("checkpoint.restart", "true"), ("failures.detect", "5M"),
    ("checkpoint.cost", "5 parsecs"), ("failures.distribution", "poisson"),
    ("cluster.nodes", "1000000000000"), ("cluster.nodes", "9" * 40),
    ("cluster.spares", "10000000000"),
]

#: System-profile values that are nonsense (a text replacement in :data:`SYSTEM`).
SYSTEM_VALUES = [
    ("peak_TFLOPS: {fp32: 10.0", "peak_TFLOPS: {fp32: -10.0"),
    ("peak_TFLOPS: {fp32: 10.0", "peak_TFLOPS: {fp32: .nan"),
    ("peak_TFLOPS: {fp32: 10.0", "peak_TFLOPS: {fp32: 0"),
    ("bandwidth_GBps: 12.5", "bandwidth_GBps: .inf"),
    ("bandwidth_GBps: 12.5", "bandwidth_GBps: 0"),
    ("latency_us: 10.0", "latency_us: -1"),
    ("memory_GiB: 16", "memory_GiB: 1e300"),
    ("gpus_per_node: 4", "gpus_per_node: 0"),
    ("pfs_per_node_GBps: 2.0", "pfs_per_node_GBps: .nan"),
]

#: CSV-level mutations of each CSV kind (text → text).
def _short_last_row(text: str) -> str:
    """The last row loses its last two cells (a truncated copy)."""
    return text.rstrip("\n").rsplit(",", 2)[0] + "\n"


CSV_MUTATIONS: dict[str, dict[str, Callable[[str], str]]] = {
    "trace": {"nan-time": lambda t: t.replace("9h,", "nan,"),
              "inf-time": lambda t: t.replace("9h,", "inf,"),
              "negative-node": lambda t: t.replace(",2,", ",-2,"),
              "unsorted": lambda t: t.replace("20h,", "1h,"),
              "extra-cells": lambda t: t.replace("6h\n", "6h,x,y\n"),
              "no-header": lambda t: "\n".join(t.splitlines()[1:]) + "\n",
              "quote-chaos": lambda t: t.replace("Faulty GPU", '"Faulty\nGPU'),
              "huge-repair": lambda t: t.replace(",6h", ",1e300h"),
              "short-row": _short_last_row},
    "causes": {"nan-count": lambda t: t.replace("148", "nan"),
               "inf-count": lambda t: t.replace("148", "inf"),
               "negative-count": lambda t: t.replace("148", "-3"),
               "missing-column": lambda t: t.replace("count", "cnt"),
               "duplicate-cause": lambda t: t + "Faulty GPU,GPU,3\n",
               "short-row": _short_last_row},
    "calibration": {"nan-time": lambda t: t.replace("0.11", "nan"),
                    "inf-time": lambda t: t.replace("0.11", "inf"),
                    "tiny-time": lambda t: t.replace("0.11", "1e-300"),
                    "huge-time": lambda t: t.replace("0.11", "1e300"),
                    "huge-gpus": lambda t: t.replace("resnet50,data,4,", "resnet50,data,1000000000000,"),
                    "missing-column": lambda t: t.replace("s_per_iter_median", "median"),
                    "bad-shape": lambda t: t.replace("3x224x224", "3x0x224"),
                    "short-row": _short_last_row},
    "dataset": {"nan-value": lambda t: t.replace("0.5,", "nan,", 1),
                "missing-target": lambda t: t.replace("label", "lbl"),
                "inf-value": lambda t: t.replace("1.0,", "inf,", 1),
                "ragged": lambda t: t.replace("\n1.5,", "\n1.5,9,9,"),
                "text-value": lambda t: t.replace("2.0,", "two,", 1),
                "short-row": _short_last_row},
    "fta": {"nan-start": lambda t: t.replace("1136080800", "nan"),
            "stop-before-start": lambda t: t.replace("1136095200", "1"),
            "short-row": lambda t: t.split("\t7\t")[0] + "\n"},
}
