"""The GUI's Qt-free models: session, graph, layout and inspector state (no Qt, no torch)."""
