"""Switchboard core layer: everything the functions import lives here."""

__version__ = "0.1.0"
