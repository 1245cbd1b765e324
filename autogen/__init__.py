"""swapgen: turn folders of local models into a llama-swap config.

Data flows one way: settings → discovery → metadata → backend resolution → emitters →
fragments → router YAML. Each step is a module named for it.
"""

__version__ = "0.3.0"

#: Bumped whenever the bytes we emit for an unchanged input change, so every model task re-runs.
GENERATOR_VERSION = "4"
