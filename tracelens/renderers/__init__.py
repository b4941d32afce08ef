"""Renderers turn analysis results into text for people (rich tables) or programs (versioned JSON)."""

from __future__ import annotations

from tracelens.renderers.base import Renderer

__all__ = ["Renderer"]
