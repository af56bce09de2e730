#!/usr/bin/python
"""Ansible module: a role's small configuration files, directories and removals in one run.

Each module run on a host starts Python and imports Ansible's module_utils: 0.2 s natively, seconds
under emulation or on a busy host, and `copy`/`template` pay it twice per changed file (a `stat`,
then the copy). A role's dozen files cost one run here. The content comes rendered from the
controller (inline Jinja or `lookup('template', ...)`); each file is compared, validated when
asked, and replaced atomically.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: racklift_files
short_description: Write, remove or create several small files and directories in one run
description:
  - Each entry is one path. A file is replaced atomically when its content or mode differs;
    a directory is created with its parents (or its mode set); an absent path is removed.
  - Entries are applied in order, so a directory listed first can hold the files after it.
  - Supports check mode and diff mode.
options:
  files:
    description: The paths, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      state:
        description: C(file) (write I(content)), C(directory), C(link) (to I(src)) or C(absent).
        type: str
        choices: [file, directory, link, absent]
        default: file
      src:
        description: The target a C(link) points to.
        type: str
      backup:
        description: Keep the file it replaces as C(PATH.racklift-TIMESTAMP~).
        type: bool
        default: false
      content:
        description: The file's whole content (state C(file)).
        type: str
      mode:
        description: Octal mode as a string, for example C("0644"). Default C(0644) for files,
          C(0755) for directories.
        type: str
      validate:
        description: A command run on the new content before it replaces the file; C(%s) is the
          temporary file's path. A non-zero exit fails the module and leaves the file alone.
        type: str
      unsafe_writes:
        description: Write in place when an atomic rename cannot work (a file a container
          engine bind-mounts, such as /etc/hostname).
        type: bool
        default: false
author: racklift
"""

EXAMPLES = r"""
- name: base_os's configuration files
  racklift_files:
    files:
      - path: /etc/systemd/system.conf.d
        state: directory
      - path: /etc/sysctl.d/90-racklift.conf
        content: "vm.swappiness = 1\n"
      - path: /etc/ssh/sshd_config.d/10-racklift.conf
        content: "{{ lookup('template', 'sshd.conf.j2') }}"
        validate: /usr/sbin/sshd -t -f %s
      - path: /etc/apt/apt.conf.d/01racklift-proxy
        state: absent
  register: base_os_files
"""

RETURN = r"""
changed_paths:
  description: The paths that changed (or would, in check mode), in the order given.
  type: list
  elements: str
  returned: always
"""

import os
import shlex
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

DEFAULT_MODE = {"file": 0o644, "directory": 0o755}


def _mode(module, entry):
    text = entry.get("mode")
    if text is None:
        return DEFAULT_MODE[entry["state"]]
    try:
        return int(text, 8)
    except ValueError:
        module.fail_json(msg="%s: mode %r is not octal (say \"0644\")" % (entry["path"], text))


def _current(path):
    """(kind, mode, bytes or None) of what is at `path`, kind None when nothing is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, None, None
    if stat.S_ISDIR(info.st_mode):
        return "directory", stat.S_IMODE(info.st_mode), None
    if not stat.S_ISREG(info.st_mode):
        return "other", stat.S_IMODE(info.st_mode), None
    with open(path, "rb") as handle:
        return "file", stat.S_IMODE(info.st_mode), handle.read()


def _validate(module, entry, data):
    """Run the entry's validate command on `data` in a temporary file beside the target."""
    directory = os.path.dirname(entry["path"]) or "/"
    handle, temp = tempfile.mkstemp(dir=directory if os.path.isdir(directory) else None)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        command = [part.replace("%s", temp) for part in shlex.split(entry["validate"])]
        rc, out, err = module.run_command(command)
        if rc != 0:
            module.fail_json(msg="%s: validation failed (%s): %s" % (
                entry["path"], entry["validate"], (err or out).strip()[-2000:]))
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def _write(module, entry, data, mode):
    directory = os.path.dirname(entry["path"])
    if not os.path.isdir(directory):
        module.fail_json(msg="%s: its directory %s does not exist (list it first with state "
                             "directory)" % (entry["path"], directory))
    handle, temp = tempfile.mkstemp(dir=directory)
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(temp, mode)
    if entry["backup"] and os.path.exists(entry["path"]):
        module.backup_local(entry["path"])
    module.atomic_move(temp, entry["path"], unsafe_writes=entry["unsafe_writes"],
                       keep_dest_attrs=False)
    os.chmod(entry["path"], mode)


def _link(module, path, target):
    """Point the symlink `path` at `target` (replacing a link or file there); True when changed."""
    if os.path.islink(path) and os.readlink(path) == target:
        return False
    if os.path.isdir(path) and not os.path.islink(path):
        module.fail_json(msg="%s: a directory, not replaced by a link" % path)
    if not module.check_mode:
        temp = "%s.racklift-link" % path
        if os.path.lexists(temp):
            os.unlink(temp)
        os.symlink(target, temp)
        os.rename(temp, path)
    return True


def apply(module, entry):
    """Bring one path to its state; return (changed, diff)."""
    path, state = entry["path"], entry["state"]
    if not os.path.isabs(path):
        module.fail_json(msg="%s: not an absolute path" % path)
    if state == "link":
        if not entry.get("src"):
            module.fail_json(msg="%s: state link needs src" % path)
        changed = _link(module, path, entry["src"])
        return changed, ({"before_header": path, "after_header": path, "before": "",
                          "after": "-> %s\n" % entry["src"]} if changed else None)
    kind, mode, data = _current(path)
    diff = {"before_header": path, "after_header": path}
    if state == "absent":
        if kind is None:
            return False, None
        if kind == "directory":
            module.fail_json(msg="%s: a directory, not removed (only files are)" % path)
        diff.update(before=(data or b"").decode("utf-8", "replace"), after="")
        if not module.check_mode:
            os.unlink(path)
        return True, diff
    want_mode = _mode(module, entry)
    if kind not in (None, state):
        module.fail_json(msg="%s: is a %s, wanted a %s" % (path, kind, state))
    if state == "directory":
        if kind == "directory" and mode == want_mode:
            return False, None
        diff.update(before="%s %s\n" % (kind or "absent", oct(mode or 0)),
                    after="directory %s\n" % oct(want_mode))
        if not module.check_mode:
            if kind is None:
                os.makedirs(path, want_mode)
            os.chmod(path, want_mode)
        return True, diff
    if entry.get("content") is None:
        module.fail_json(msg="%s: state file needs content" % path)
    new = entry["content"].encode("utf-8")
    if data == new and mode == want_mode:
        return False, None
    diff.update(before=(data or b"").decode("utf-8", "replace"), after=entry["content"])
    if not os.path.isdir(os.path.dirname(path)) and module.check_mode:
        # A dry run: an earlier entry (or package) of this run would make the directory.
        return True, diff
    if entry.get("validate") and data != new:
        _validate(module, entry, new)
    if not module.check_mode:
        if data == new:
            os.chmod(path, want_mode)
        else:
            _write(module, entry, new, want_mode)
    return True, diff


def main():
    module = AnsibleModule(
        argument_spec={"files": {"type": "list", "elements": "dict", "required": True, "options": {
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["file", "directory", "link", "absent"],
                      "default": "file"},
            "src": {"type": "str"},
            "backup": {"type": "bool", "default": False},
            "content": {"type": "str"},
            "mode": {"type": "str"},
            "validate": {"type": "str"},
            "unsafe_writes": {"type": "bool", "default": False},
        }}},
        supports_check_mode=True,
    )
    changed_paths, diffs = [], []
    for entry in module.params["files"]:
        changed, diff = apply(module, entry)
        if changed:
            changed_paths.append(entry["path"])
            diffs.append(diff)
    result = {"changed": bool(changed_paths), "changed_paths": changed_paths}
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
