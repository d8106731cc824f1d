from dataclasses import dataclass


@dataclass
class NoneConfig:
    """The identity module has nothing to configure: the model keeps its own attention."""
