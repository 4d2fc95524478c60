"""Adapters to real engines behind one small protocol (see engines/protocol.py)."""
