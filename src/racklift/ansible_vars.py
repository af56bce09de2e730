"""Each host's variables as Ansible resolves them, for the modules racklift runs in Ansible's
environment (racklift.ansible.run_in_ansible: `racklift.verify.reach`, `racklift.hostvars`):
the inventory's sources, group and host vars, Ansible Vault (the operator's password file or
identity list from the environment or ansible.cfg, as ansible-playbook loads them), the run's
extra vars, and Ansible's own templar. Playbooks' relative paths (a `file` lookup) resolve from
playbooks/, as in a playbook run.

Imported only in those child processes: Ansible's configuration loads on import, from
ANSIBLE_CONFIG, and never in racklift's own process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from racklift.ansible import PLAYBOOKS


class HostVars:
    """The inventory and its variables, loaded once for many hosts."""

    def __init__(self) -> None:
        from ansible import constants
        from ansible.cli import CLI
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.plugins.loader import init_plugin_loader
        from ansible.vars.manager import VariableManager

        init_plugin_loader()
        self.constants = constants
        self.loader = DataLoader()
        self.loader.set_basedir(str(PLAYBOOKS))
        # As ansible-playbook does with no --vault options: the configured identities and
        # password file, never a prompt.
        secrets = CLI.setup_vault_secrets(
            self.loader, vault_ids=list(constants.DEFAULT_VAULT_IDENTITY_LIST),
            vault_password_files=[], ask_vault_pass=False, auto_prompt=False)
        self.loader.set_vault_secrets(secrets)
        self.inventory = InventoryManager(loader=self.loader,
                                          sources=constants.DEFAULT_HOST_LIST)
        self.variables = VariableManager(loader=self.loader, inventory=self.inventory)

    def of(self, name: str, extravars: Mapping[str, Any]
           ) -> tuple[dict[str, Any], Callable[[Any], Any]] | None:
        """The host's vars (untemplated) and a function templating one of them; None for a host
        the inventory does not hold."""
        from ansible.template import Templar

        host = self.inventory.get_host(name)
        if host is None:
            return None
        # Extra vars win over every other source (Ansible's precedence).
        hostvars = {**self.variables.get_vars(host=host, include_hostvars=False), **extravars}
        templar = Templar(loader=self.loader, variables=hostvars)

        def value(raw: Any) -> Any:
            return templar.template(raw) if raw is not None else None

        return hostvars, value
