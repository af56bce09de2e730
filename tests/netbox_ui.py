"""NetBox's web UI as a person uses it: NetBox's own login form, with the lab admin's password
(racklift.lab.netbox_server.admin_password)."""

from __future__ import annotations

import re

import requests

USER = "admin"  # the lab database's admin, whose password netbox_server.admin_password sets


def session(url: str, password: str) -> requests.Session:
    """Logged in through NetBox's login form (its CSRF token and all)."""
    s = requests.Session()
    form = s.get(f"{url}/login/", timeout=60)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert csrf, "NetBox's login form has no CSRF token"
    done = s.post(f"{url}/login/", data={"csrfmiddlewaretoken": csrf[1], "username": USER,
                                         "password": password, "next": "/"},
                  headers={"Referer": f"{url}/login/"}, timeout=60)
    assert done.ok and "sessionid" in s.cookies, "NetBox refused the lab admin's login"
    return s
