"""racklift's NetBox plugin: what racklift wrote into NetBox, where operators look."""

from typing import Any, ClassVar

from netbox.plugins import PluginConfig

__version__ = "0.1.0"


class RackliftConfig(PluginConfig):
    name = "netbox_racklift"
    verbose_name = "racklift"
    description = "racklift's results on each device, and each site's and rack's bring-up"
    version = __version__
    base_url = "racklift"
    min_version = "4.7.0"  # what it is tested on (4.7.3)
    default_settings: ClassVar[dict[str, Any]] = {
        # The device roles of the hosts racklift brings up (its bootstrap creates gpu-server).
        "roles": ["gpu-server"],
        # racklift's journal entries shown on a device's tab, newest first.
        "journal_entries": 50,
    }

    def ready(self) -> None:
        super().ready()
        # The tabs register themselves on import; NetBox builds its URLs after every app is
        # ready, so they exist by then.
        from netbox_racklift import views  # noqa: F401


config = RackliftConfig
