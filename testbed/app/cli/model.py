"""``testbed model``: inspect, list and export the model zoo.

``info NAME`` prints per-kind layer counts and totals (``--json`` for machines),
``list`` the known models, ``export NAME -o FILE.net`` the ParaDL ``.net`` description.
NAME is a zoo name (aliases allowed) or a path to a ParaDL ``.net``/``.net_sc`` file.
"""

from __future__ import annotations

from collections import Counter

import click

from testbed.app.cli.common import emit_json
from testbed.errors import InputError
from testbed.io.write import check_writable_target, write_text
from testbed.model.ir import LAYER_KINDS, Model
from testbed.model.netfile import export_net
from testbed.model.registry import MODELS, get_model, list_models

_SHAPE_HELP = "per-sample input shape C x spatial..., e.g. 3x224x224 or 4x128x128x128"


def info_dict(model: Model) -> dict:
    """``Model.summary()`` plus per-kind layer counts, for ``info --json``."""
    data = model.summary()
    counts = Counter(layer.kind for layer in model.layers)
    data["layers_by_kind"] = {kind: counts[kind] for kind in LAYER_KINDS if counts[kind]}
    data["source"] = model.source
    if model.profiled_s_per_sample is not None:
        data["profiled_s_per_sample"] = model.profiled_s_per_sample
    return data


def info_table(data: dict) -> str:
    rows = [("model", data["name"]), ("source", data["source"]),
            ("input shape", data["input_shape"]),
            ("layers", f"{data['layers']:,}")]
    rows += [(f"  {kind}", f"{n:,}") for kind, n in data["layers_by_kind"].items()]
    rows += [("parameters", f"{data['parameters']:,}"),
             ("weight elements (Σ|w|)", f"{data['weight_elements']:,}"),
             ("forward MACs / sample", f"{data['forward_macs']:,}"),
             ("forward FLOPs / sample", f"{data['forward_flops']:,}"),
             ("activations / sample", f"{data['activation_elements_per_sample']:,}")]
    if "profiled_s_per_sample" in data:
        rows.append(("profiled s / sample", f"{data['profiled_s_per_sample']:.6g}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


@click.group("model")
def model_group() -> None:
    """Inspect the model zoo and ParaDL .net files."""


@model_group.command("info")
@click.argument("name")
@click.option("--input-shape", default=None, help=_SHAPE_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def info_cmd(name: str, input_shape: str | None, as_json: bool) -> None:
    """Parameters, MACs, layers and activations of model NAME (or a .net file)."""
    data = info_dict(_model(name, input_shape))
    if as_json:
        emit_json(data)
        return
    click.echo(info_table(data))


@model_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def list_cmd(as_json: bool) -> None:
    """The code-built models with their default input shapes."""
    rows = [{"name": n, "default_input_shape": "x".join(map(str, MODELS[n][1])),
             "description": MODELS[n][2]} for n in list_models()]
    if as_json:
        emit_json(rows)
        return
    width = max(len(r["name"]) for r in rows)
    shape_w = max(len(r["default_input_shape"]) for r in rows)
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['default_input_shape']:<{shape_w}}  "
                   f"{r['description']}")


@model_group.command("export")
@click.argument("name")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="the .net file to write")
@click.option("--input-shape", default=None, help=_SHAPE_HELP)
@click.option("--dataset", default="ImageNet", show_default=True, help="Dataset| header")
@click.option("--dataset-samples", default=1280000, show_default=True, type=int,
              help="samples on the Input| header")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a line")
def export_cmd(name: str, output: str, input_shape: str | None, dataset: str,
               dataset_samples: int, as_json: bool) -> None:
    """Write model NAME as a ParaDL .net file (atomically: temp file, then rename)."""
    if dataset_samples <= 0:
        raise InputError("must be a positive number of samples", field="--dataset-samples")
    target = check_writable_target(output, field="-o")
    model = _model(name, input_shape)
    text = export_net(model, dataset=dataset, dataset_samples=dataset_samples)
    write_text(target, text, field="-o")
    layers = text.count(chr(10)) - 3
    if as_json:
        emit_json({"model": model.name, "output": str(target), "layers": layers,
                   "dataset": dataset, "dataset_samples": dataset_samples,
                   "input_shape": "x".join(map(str, model.input_shape))})
        return
    click.echo(f"wrote {target} ({layers} layers)")


def _model(name: str, input_shape: str | None) -> Model:
    return get_model(name, input_shape)
