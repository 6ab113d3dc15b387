"""Framework back ends of the training harness (each imports its framework lazily)."""
