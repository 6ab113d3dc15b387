"""Layer IR, model zoo and ParaDL ``.net`` import/export."""

from testbed.model.ir import LAYER_KINDS, Layer, Model

__all__ = ["LAYER_KINDS", "Layer", "Model"]
