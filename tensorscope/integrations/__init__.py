"""Callbacks for training frameworks: ``tensorscope.integrations.lightning`` and
``tensorscope.integrations.transformers``.

Each submodule imports its framework when it is imported itself; importing
``tensorscope`` (or this package) loads neither. Install them with the extras
``tensorscope[lightning]`` and ``tensorscope[transformers]``.
"""
