"""``testbed oracle predict``, ``sweep``, ``collective`` and ``verify``."""

from __future__ import annotations

import click

from testbed.app.cli.common import Names, emit_json, positive, shape_option, table
from testbed.errors import InputError
from testbed.oracle import MODES, STRATEGIES, Estimate, Request, estimate, resolve_model
from testbed.oracle.collectives import OPS, bus_factor
from testbed.oracle.context import network_for
from testbed.oracle.names import DEFAULT_SCHEDULE, SCHEDULES
from testbed.oracle.state import OPTIMIZER_SLOTS, PRECISIONS
from testbed.oracle.sweep import DEFAULT_MIN_BATCH_PER_GPU, DEFAULT_MIN_EFFICIENCY, sweep
from testbed.resilience.ckpt_cost import TIERS, WRITERS
from testbed.systems.profile import load_system
from testbed.units import format_bytes, format_duration, parse_size_bytes


def _mask(path: str | None, model):
    if path is None:
        return None
    from testbed.model.netfile import load_mask
    return load_mask(path, model)


def print_estimate(e: Estimate) -> None:
    """Readable report of one estimate."""
    head = f"{e.model} on {e.system}: {e.strategy}, {e.gpus} GPU(s), global batch {e.global_batch}"
    if e.group_size:
        head += f", groups of {e.group_size}"
    if e.mode != "testbed":
        head += f" [{e.mode} mode]"
    click.echo(head)
    if e.time_per_iteration_s is None:
        click.echo(f"  infeasible: {e.reason}")
        return
    rows = [
        ("time per iteration", format_duration(e.time_per_iteration_s), "100.0%"),
    ]
    for name, value in e.phases_s.items():
        if value > 0:
            rows.append((f"  {name}", format_duration(value),
                         f"{100 * value / e.time_per_iteration_s:.1f}%"))
    click.echo(table(["phase", "time", "share"], rows))
    click.echo(f"throughput: {e.samples_per_s:,.1f} samples/s   bottleneck: {e.bottleneck}")
    if e.calibration:
        click.echo(f"basis: {e.calibration}")
    if e.collectives:
        click.echo(table(["collective", "time", "algorithm", "tier", "count"],
                         [(c["phase"], format_duration(c["time_s"]), c["algorithm"], c["tier"],
                           c["count"]) for c in e.collectives], align="lrllr"))
    mem = [(k, format_bytes(v)) for k, v in e.memory_breakdown_bytes.items() if v]
    click.echo(table(["memory per GPU", "bytes"],
                     mem + [("total", f"{format_bytes(e.memory_per_gpu_bytes or 0)} of "
                                      f"{format_bytes(e.memory_capacity_bytes or 0)}")]))
    click.echo(f"per epoch ({e.iterations_per_epoch:,} iterations): "
               f"{format_duration(e.epoch_s or 0.0)} (compute {e.compute_epoch_s:.2f} s, "
               f"communication {e.communication_epoch_s:.3f} s)")
    if e.input_bytes_per_sample is not None:
        click.echo(f"inputs: {format_bytes(e.input_bytes_per_sample)} per sample "
                   f"({e.input_precision}), dataset {format_bytes(e.dataset_bytes or 0.0)}, "
                   f"staging {format_duration(e.staging_s or 0.0)}")
    if e.checkpoint:
        _print_checkpoint(e.checkpoint)
    if not e.feasible:
        click.echo(f"INFEASIBLE: {e.reason}")


def _print_checkpoint(c: dict) -> None:
    terms = [("device-to-host copy", c["device_to_host_s"]), ("serialisation", c["serialize_s"]),
             ("transfer", c["transfer_s"]), ("file create", c["metadata_s"]),
             ("fsync", c["fsync_s"])]
    click.echo(f"checkpoint of {format_bytes(c['state_bytes'])} to {c['tier']}: "
               f"{c['writers']} writer(s) on {c['writer_nodes']} node(s), "
               f"write {format_duration(c['write_s'])}, read {format_duration(c['read_s'])} "
               f"({c.get('basis', 'physics')})")
    click.echo(table(["checkpoint term", "time"], [(n, format_duration(v)) for n, v in terms],
                     align="lr"))


@click.group("oracle")
def oracle() -> None:
    """Analytical cost model of parallel CNN training (ParaDL-faithful, calibrated)."""


@oracle.command("predict")
@click.option("--system", required=True, help="System profile name or YAML path.")
@click.option("--model", required=True, help="Zoo model name or ParaDL .net file.")
@click.option("--strategy", required=True, type=Names(STRATEGIES, "strategy"),
              help="How the model is split over the GPUs (df: data × filter, ds: data × "
                   "spatial hybrids).")
@click.option("--gpus", required=True, type=int, help="GPUs the job uses (all strategies).")
@click.option("--global-batch", required=True, type=int,
              help="Samples per training step over all GPUs.")
@click.option("--group-size", type=int, help="GPUs per model-parallel group (df, ds).")
@click.option("--input-shape", help="Per-sample shape, e.g. 3x224x224.")
@click.option("--precision", default=None, type=Names(PRECISIONS, "precision", fold_case=True),
              help="Training precision (default: the system's usual one, gpu.training_precision).")
@click.option("--input-precision", default=None,
              help="How input samples are stored: fp32, fp16, bf16, uint8, int8, int4, … "
                   "(default uint8, decoded images).")
@click.option("--optimizer", default="momentum", show_default=True,
              help="Optimizer whose state is held per GPU and checkpointed: "
                   + ", ".join(OPTIMIZER_SLOTS) + ".")
@click.option("--checkpoint-writers", type=click.Choice(WRITERS), default="single",
              show_default=True, help="Who writes a replicated state.")
@click.option("--checkpoint-tier", type=click.Choice(TIERS), default="pfs", show_default=True,
              help="Storage tier the checkpoint is written to.")
@click.option("--framework", default=None,
              help="Calibrated profiles: the framework whose fitted compute and checkpoint "
                   "storage apply (default: the profile's, calibration.records_fit.framework).")
@click.option("--checkpoint-format", default=None,
              help="Calibrated profiles: the fitted checkpoint format (default: the "
                   "profile's, calibration.records_fit.checkpoint_format).")
@click.option("--software", default=None,
              help="Software stack of the profile's software section, by key or framework "
                   "(pytorch, cuda-graphs, mxnet, tensorflow, paddle, …; default: the "
                   "profile's).")
@click.option("--bucket-mb", "bucket_mb", type=float, default=None,
              help="Gradient bucket size in MB (PyTorch DDP's bucket_cap_mb; default: the "
                   "stack's, 25).")
@click.option("--micro-batches", type=int, help="Pipeline micro-batches (default min(B, 4p)).")
@click.option("--schedule", type=Names(SCHEDULES, "pipeline schedule"), default=DEFAULT_SCHEDULE,
              show_default=True, help="Pipeline schedule.")
@click.option("--overlap/--no-overlap", default=None,
              help="Overlap gradient all-reduce with backward (default: the system's).")
@click.option("--mode", type=Names(MODES, "mode"), default="testbed", show_default=True,
              help="testbed (corrected, calibrated) or paradl (ParaDL's published formulas).")
@click.option("--mask", "mask_path", help="ParaDL .lc layer mask for filter/channel/spatial.")
@click.option("--epoch-samples", type=int, help="Samples per epoch (default 1,280,000).")
@click.option("--sample-bytes", type=float, help="Bytes read per input sample.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def predict_cmd(system, model, strategy, gpus, global_batch, group_size, input_shape, precision,
                input_precision, optimizer, checkpoint_writers, checkpoint_tier, framework,
                checkpoint_format, software, bucket_mb, micro_batches, schedule, overlap, mode,
                mask_path, epoch_samples, sample_bytes, as_json) -> None:
    """Predict time per iteration and memory per GPU of one configuration."""
    positive(gpus, "--gpus")
    positive(global_batch, "--global-batch")
    if epoch_samples is not None:
        positive(epoch_samples, "--epoch-samples")
    sysp = load_system(system)
    mdl = resolve_model(model, shape_option(input_shape))
    req = Request(model=mdl, system=sysp, strategy=strategy, gpus=gpus,
                  global_batch=global_batch, group_size=group_size, precision=precision,
                  optimizer=optimizer, micro_batches=micro_batches, schedule=schedule,
                  overlap=overlap, mode=mode, mask=_mask(mask_path, mdl),
                  sample_bytes=sample_bytes, epoch_samples=epoch_samples,
                  input_precision=input_precision, checkpoint_writers=checkpoint_writers,
                  checkpoint_tier=checkpoint_tier, framework=framework,
                  checkpoint_format=checkpoint_format, software=software, bucket_MB=bucket_mb)
    est = estimate(req)
    if as_json:
        emit_json(est.to_dict())
    else:
        print_estimate(est)


def strategy_table(result, batch: int, top: int | None = None) -> str:
    rows = []
    for rank, e in enumerate(result.ranked(batch), start=1):
        if top and rank > top:
            break
        rows.append((rank, e.strategy, e.gpus, f"{e.samples_per_gpu:g}", e.precision,
                     format_duration(e.time_per_iteration_s), f"{e.samples_per_s:,.0f}",
                     format_bytes(e.memory_per_gpu_bytes), e.bottleneck))
    return table(["rank", "strategy", "gpus", "batch/replica", "precision", "time/iter",
                  "samples/s", "memory/GPU", "bottleneck"], rows, align="rlrrlrrrl")


@oracle.command("sweep")
@click.option("--system", required=True, help="System profile name or YAML path.")
@click.option("--model", required=True, help="Zoo model name or ParaDL .net file.")
@click.option("--global-batch", "batches", type=int, multiple=True,
              help="Global batch size(s); repeat the option (default 256, 1024, 4096).")
@click.option("--max-gpus", type=int, default=4096, show_default=True,
              help="Largest GPU count tried (powers of two up to it).")
@click.option("--group-size", type=int, help="GPUs per model-parallel group (df, ds).")
@click.option("--input-shape", help="Per-sample shape, e.g. 3x224x224.")
@click.option("--precision", default=None, type=Names(PRECISIONS, "precision", fold_case=True),
              help="Training precision (default: the system's usual one).")
@click.option("--input-precision", default=None, help="How input samples are stored.")
@click.option("--optimizer", default="momentum", show_default=True,
              help="Optimizer whose state is held per GPU: " + ", ".join(OPTIMIZER_SLOTS)
                   + ".")
@click.option("--min-batch-per-gpu", type=int, default=DEFAULT_MIN_BATCH_PER_GPU,
              show_default=True, help="Skip points where a replica sees fewer samples per step.")
@click.option("--min-efficiency", type=float, default=DEFAULT_MIN_EFFICIENCY, show_default=True,
              help="Skip points below this share of the best per-GPU rate (0 keeps all).")
@click.option("--strategy", "strategies", multiple=True, type=Names(STRATEGIES, "strategy"),
              help="Limit to these strategies.")
@click.option("--software", default=None,
              help="Software stack (default: the profile's; see oracle predict --software).")
@click.option("--top", type=int, default=15, show_default=True, help="Rows per batch size.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sweep_cmd(system, model, batches, max_gpus, group_size, input_shape, precision,
              input_precision, optimizer, min_batch_per_gpu, min_efficiency, strategies, software,
              top, as_json) -> None:
    """Every feasible strategy × powers of two of GPUs, ranked, with the bottleneck."""
    positive(max_gpus, "--max-gpus")
    positive(top, "--top")
    batches = batches or (256, 1024, 4096)
    for b in batches:
        positive(b, "--global-batch")
    sysp = load_system(system)
    mdl = resolve_model(model, shape_option(input_shape))
    result = sweep(mdl, sysp, batches, max_gpus=max_gpus, strategies=strategies or STRATEGIES,
                   group_size=group_size, precision=precision, optimizer=optimizer,
                   min_batch_per_gpu=min_batch_per_gpu, min_efficiency=min_efficiency,
                   input_precision=input_precision, software=software)
    if as_json:
        emit_json({
            "model": mdl.name, "system": sysp.name,
            "ranked": [e.to_dict() for b in batches for e in result.ranked(b)],
            "infeasible": [{"strategy": e.strategy, "gpus": e.gpus,
                            "global_batch": e.global_batch, "reason": e.reason}
                           for e in result.infeasible],
        })
        return
    for b in batches:
        click.echo(f"\n{mdl.name} on {sysp.name}, global batch {b}: "
                   f"{len(result.ranked(b))} feasible configurations")
        click.echo(strategy_table(result, b, top))
    skipped = sum(1 for e in result.infeasible if (e.reason or "").startswith("skipped"))
    click.echo(f"\n{len(result.infeasible) - skipped} infeasible and {skipped} degenerate "
               f"configurations left out (use --json to see each reason)")


@oracle.command("collective")
@click.option("--system", required=True, help="System profile name or YAML path.")
@click.option("--op", type=click.Choice(OPS), required=True, help="Collective operation.")
@click.option("--bytes", "size", required=True,
              help="Message size as nccl-tests counts it, e.g. 1GiB, 64MB, 4096.")
@click.option("--gpus", required=True, type=int, help="Ranks taking part.")
@click.option("--stride", type=int, default=1, show_default=True,
              help="GPUs between consecutive ranks (1: fill nodes first).")
@click.option("--model", default=None,
              help="Calibrated profiles: use this model's fitted network efficiencies "
                   "(default: the median over the measured models), as oracle predict does.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def collective_cmd(system, op, size, gpus, stride, model, as_json) -> None:
    """Time, algorithm bandwidth and bus bandwidth of one collective, as nccl-tests
    reports them (busbw = algbw × 2(n−1)/n all-reduce, (n−1)/n all-gather and
    reduce-scatter, 1 broadcast), on the same calibrated network ``oracle predict``
    uses (fitted efficiencies and α–β of the profile's calibration)."""
    positive(gpus, "--gpus")
    positive(stride, "--stride")
    nbytes = parse_size_bytes(size, source="--bytes")
    if nbytes <= 0:
        raise InputError("must be a positive size", source="--bytes")
    sysp = load_system(system)
    if (gpus - 1) * stride + 1 > sysp.max_gpus:
        raise InputError(f"{gpus} ranks {stride} apart do not fit in {sysp.max_gpus} GPUs",
                         source="--gpus")
    net = network_for(sysp, model)
    fabric = net.fabric
    cost = fabric.cost(op, nbytes, gpus, stride)
    fit = fabric.fitted_for(op, cost.tier, gpus) if fabric.fitted else None
    algbw = nbytes / cost.time_s if cost.time_s > 0 else 0.0
    out = {"system": sysp.name, "op": op, "bytes": nbytes, "gpus": gpus, "stride": stride,
           "time_s": cost.time_s, "algorithm": cost.algorithm, "protocol": cost.protocol,
           "tier": cost.tier, "algbw_GBps": algbw / 1e9,
           "busbw_GBps": algbw * bus_factor(op, gpus) / 1e9,
           "library": sysp.network.library,
           "basis": f"fitted α–β ({fit.backend}, {fit.processes} processes)" if fit
           else net.source}
    if as_json:
        emit_json(out)
        return
    click.echo(f"{op} of {format_bytes(nbytes)} among {gpus} GPU(s) on {sysp.name} "
               f"({sysp.network.library}): {cost.algorithm}/{cost.protocol} over {cost.tier} "
               f"[{out['basis']}]")
    click.echo(table(["time", "algbw (GB/s)", "busbw (GB/s)"],
                     [(format_duration(cost.time_s), f"{out['algbw_GBps']:.2f}",
                       f"{out['busbw_GBps']:.2f}")], align="rrr"))


@oracle.command("layers")
@click.option("--system", required=True, help="System profile name or YAML path.")
@click.option("--model", required=True, help="Zoo model name or ParaDL .net file.")
@click.option("--batch", required=True, type=int, help="Samples per GPU.")
@click.option("--input-shape", help="Per-sample shape, e.g. 3x224x224.")
@click.option("--precision", default=None, type=Names(PRECISIONS, "precision", fold_case=True),
              help="Training precision (default: the system's usual one).")
@click.option("--software", default=None, help="Software stack (default: the profile's).")
@click.option("--top", type=int, default=15, show_default=True, help="Slowest layers shown.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def layers_cmd(system, model, batch, input_shape, precision, software, top, as_json) -> None:
    """Where one GPU's training step goes, layer by layer (the per-layer model: GEMMs on
    their roofline with tile waves, memory-bound kernels, the host's launches)."""
    from testbed.oracle.device import software_stack
    from testbed.oracle.kernels import step_times
    from testbed.oracle.state import dtype_bytes

    positive(batch, "--batch")
    positive(top, "--top")
    sysp = load_system(system)
    if not sysp.gpu.per_layer:
        raise InputError(f"system {sysp.name} has no per-layer data (gpu.sm_count, "
                         f"gpu.gemm_efficiency, gpu.memory_bandwidth_GBps)", source="--system")
    mdl = resolve_model(model, shape_option(input_shape))
    prec = precision or sysp.gpu.training_precision
    stack = software_stack(sysp, software)
    t = step_times(mdl, batch, sysp.gpu, stack, prec, dtype_bytes(prec))
    rows: list[dict] = [{"layer": lyr.name, "kind": lyr.kind, "forward_s": float(f),
                         "backward_s": float(b)}
                        for lyr, f, b in zip(mdl.layers, t.forward_gpu_s, t.backward_gpu_s,
                                             strict=True)]
    out = {"system": sysp.name, "model": mdl.name, "batch": batch, "precision": prec,
           "software": stack.name, "gpu_s": t.gpu_s, "host_s": t.host_s,
           "optimizer_s": t.optimizer_gpu_s, "step_s": t.total_s, "kernels": t.kernels,
           "host_bound": t.host_bound, "layers": rows}
    if as_json:
        emit_json(out)
        return
    click.echo(f"{mdl.name} on one {sysp.gpu.model}, {batch} samples, {prec}, {stack.name}: "
               f"step {format_duration(t.total_s)} (GPU {format_duration(t.gpu_s)}, host "
               f"{format_duration(t.host_s)}{', host-bound' if t.host_bound else ''}), "
               f"{t.kernels} kernels, optimizer {format_duration(t.optimizer_gpu_s)}")
    slowest = sorted(rows, key=lambda r: -(r["forward_s"] + r["backward_s"]))[:top]
    click.echo(table(["layer", "kind", "forward", "backward", "share"],
                     [(r["layer"], r["kind"], format_duration(r["forward_s"]),
                       format_duration(r["backward_s"]),
                       f"{100 * (r['forward_s'] + r['backward_s']) / t.gpu_s:.1f}%")
                      for r in slowest], align="llrrr"))


@oracle.command("ledger")
@click.option("--system", required=True, help="System profile name or YAML path.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ledger_cmd(system, as_json) -> None:
    """Every number of a profile and what it rests on: a datasheet, a measurement in this
    repository, a fit on a named data set, or an assumption (issue 18)."""
    from testbed.io.read import load_yaml
    from testbed.systems.profile import profile_path
    from testbed.systems.sources import ledger

    sysp = load_system(system)
    doc = load_yaml(str(profile_path(system)))
    rows = ledger(doc.data if isinstance(doc.data, dict) else {}, sysp.sources)
    if as_json:
        emit_json({"system": sysp.name, "constants": rows})
        return
    click.echo(table(["constant", "value", "kind", "rests on"],
                     [(r["path"], f"{r['value']:g}" if isinstance(r["value"], int | float)
                       else str(r["value"]), r["kind"] or "MISSING",
                       (r["ref"] or "") + (f" [fit on {', '.join(r['data'])}]" if r["data"]
                                           else "")) for r in rows], align="lrll"))
    missing = sum(1 for r in rows if r["kind"] is None)
    kinds = {k: sum(1 for r in rows if r["kind"] == k)
             for k in ("datasheet", "measurement", "fit", "assumed")}
    click.echo(f"\n{len(rows)} constants: " + ", ".join(f"{v} {k}" for k, v in kinds.items())
               + (f", {missing} without a source" if missing else ""))


@oracle.command("verify")
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option("--system", required=True, help="Profile to check (name or YAML path).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def verify_cmd(measurements, system, as_json) -> None:
    """Predicted vs measured seconds per iteration for every row of a measurement CSV
    (calibration format), with min(pred, meas)/max(pred, meas) accuracy; nothing is fitted."""
    from pathlib import Path

    from testbed.calibration.abci_csv import evaluate, read_measurements

    if not Path(measurements).exists():
        raise InputError("no such file", source=measurements)
    rows = evaluate(read_measurements(measurements), load_system(system))
    mean = sum(r["accuracy"] for r in rows) / len(rows)
    if as_json:
        emit_json({"rows": rows, "mean_accuracy": mean})
        return
    click.echo(table(["model", "strategy", "gpus", "batch", "measured", "predicted", "accuracy"],
                     [(r["model"], r["strategy"], r["gpus"], r["global_batch"],
                       f"{r['measured_s']:.4f}",
                       f"{r['predicted_s']:.4f}" if r["predicted_s"] else "infeasible",
                       f"{r['accuracy']:.3f}") for r in rows], align="llrrrrr"))
    click.echo(f"\nmean accuracy over {len(rows)} runs: {mean:.4f}")
