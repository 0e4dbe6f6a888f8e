"""Wire code shared by both processes: messages, frames, sockets, conditions, slices."""
