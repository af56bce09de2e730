"""racklift: take racks of GPU servers from bare metal to a validated pool."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("racklift")
except PackageNotFoundError:  # running from a checkout without an install
    __version__ = "0.0.0"
