"""Observed facts about a host: typed results of parsing what racklift collects from it."""
