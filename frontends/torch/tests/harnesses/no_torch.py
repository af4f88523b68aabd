"""Imports torch first: with an interpreter that lacks it, capture must say so."""
import torch  # noqa: F401

MESH = {"dp": 2}
