"""Errors that carry a message meant for the operator: what failed, and what to do."""


class RackliftError(Exception):
    """An error the command line prints as one clear line and exits non-zero on."""


class NetBoxError(RackliftError):
    """NetBox is unreachable, rejected the token, is too old, or refused a request."""


class LabError(RackliftError):
    """The lab (local NetBox, PostgreSQL, Redis, containers) could not be brought up."""
