"""Training-side instrumentation (imports torch, never Qt).

Installed as ``tensorscope.hooks``; never import it as bare ``hooks``.
"""
