"""The desktop GUI (imports Qt, never torch: tensors arrive as numpy).

Installed as ``tensorscope.ui``; never import it as bare ``ui``.
"""
