"""Shape-consistency check of a model's layer graph.

Every layer's ``x`` must equal its producer's ``y`` (the previous layer when
``inputs`` is empty); an ``add`` needs all inputs of its own shape; a ``concat`` needs
equal spatial sizes and channels that sum to its ``y``. The zoo's builders satisfy this
by construction; ParaDL ``.net`` files need not (``COSMOFLOW.net_256`` has a typo).
"""

from __future__ import annotations

from testbed.model.ir import Model


def shape_problems(model: Model) -> list[str]:
    """Every inconsistency found, as readable lines (empty when the graph is sound)."""
    problems: list[str] = []
    shapes: dict[str, tuple[int, ...]] = {}
    previous = model.input_shape
    for i, layer in enumerate(model.layers):
        if layer.inputs:
            missing = [n for n in layer.inputs if n not in shapes]
            if missing:
                problems.append(f"{layer.name}: unknown or later producer(s) {missing}")
                continue
            produced = [shapes[n] for n in layer.inputs]
        else:
            produced = [previous]
        if layer.kind == "concat":
            if any(p[1:] != layer.y[1:] for p in produced):
                problems.append(f"{layer.name}: concat inputs {produced} differ spatially")
            if sum(p[0] for p in produced) != layer.y[0] or layer.x != layer.y:
                problems.append(f"{layer.name}: channels {[p[0] for p in produced]} do not "
                                f"sum to {layer.y}")
        else:
            for p in produced:
                if p != layer.x:
                    problems.append(f"layer {i} {layer.name}: x={layer.x} but producer gives {p}")
        if layer.kind in ("bn", "relu", "add", "dropout") and layer.y != layer.x:
            problems.append(f"{layer.name}: {layer.kind} changes shape {layer.x}->{layer.y}")
        if layer.kind in ("conv", "deconv", "fc") and layer.w[:1] != layer.x[:1]:
            problems.append(f"{layer.name}: weight {layer.w} does not match input {layer.x}")
        if layer.name in shapes:
            problems.append(f"{layer.name}: duplicate layer name")
        shapes[layer.name] = layer.y
        previous = layer.y
    return problems
